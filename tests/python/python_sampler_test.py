#!/usr/bin/env python3
"""atoll.ElasticSampler: a user's DataLoader takes its batches from the run's data cursor.

1. bad input: a batch size of 0, a second sampler on one node, iterating before DiLoCo is
   made, each raised as its AtollError subclass;
2. two Python nodes train a small regressor for 60 steps on a 2000-item dataset through
   DataLoader(batch_sampler=ElasticSampler(...)), each writing the indices of every step it
   took (the test's own record); one of them first asks for a second batch before stepping
   the first (a prefetching loader) and gets InvalidConfig instead of a hang;
3. no index was trained twice in the run (the two records are disjoint and repeat nothing:
   one epoch), and the exported ledger names, for each fragment, units of those records
   only, none twice; `atollctl data` counts them.

Usage: python_sampler_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys

from checks import EXPECT_TYPED, check
from head_endpoint import stop_and_show, wait_for_endpoint

STEPS, BATCH, ITEMS = 60, 8, 2000

ERRORS = EXPECT_TYPED + """
node = atoll.join("tcp://127.0.0.1:1")
expect(atoll.InvalidConfig, lambda: atoll.ElasticSampler(node, 100, 0))
expect(atoll.InvalidConfig, lambda: atoll.ElasticSampler(object(), 100, 4))
sampler = atoll.ElasticSampler(node, 100, 4)
expect(atoll.InvalidConfig, lambda: atoll.ElasticSampler(node, 100, 4))
expect(atoll.NotReady, lambda: next(iter(sampler)))
print("done")
"""

# One node: argv = head, record file, "ahead" to ask for a batch ahead first.
NODE = f"""
import itertools, json, sys, torch, atoll
head, record, ahead = sys.argv[1], sys.argv[2], sys.argv[3] == "ahead"
torch.manual_seed(0)
x = torch.randn({ITEMS}, 8)
y = x.sum(dim=1, keepdim=True)
dataset = torch.utils.data.TensorDataset(x, y)
node = atoll.join(head, wait_for_head=30)
sampler = atoll.ElasticSampler(node, len(dataset), batch_size={BATCH})
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
inner = torch.optim.AdamW(model.parameters(), lr=1e-2)
diloco = atoll.DiLoCo(node, model, inner, timeout=120)
batches = iter(sampler)
if ahead:
    first = next(batches)
    try:
        next(batches)
        sys.exit("a batch asked for ahead was given")
    except atoll.InvalidConfig as e:
        print("asked ahead:", e, flush=True)
    batches = itertools.chain([first], iter(sampler))
class Recording:  # the indices of each batch as the loader takes it: the test's own record
    def __init__(self, batches):
        self.batches, self.taken = batches, []
    def __iter__(self):
        for b in self.batches:
            self.taken.append(b)
            yield b
recording = Recording(batches)
loader = torch.utils.data.DataLoader(dataset, batch_sampler=recording)  # num_workers=0: one batch a step
with open(record, "w") as out:
    for bx, by in loader:
        loss = torch.nn.functional.mse_loss(model(bx), by)
        loss.backward()
        diloco.step(loss, samples=len(bx))
        inner.zero_grad()
        out.write(json.dumps(recording.taken[-1]) + "\\n")
        if diloco.done:
            break
node.leave()
print("trained", diloco.steps_taken, flush=True)
"""


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))

    r = subprocess.run([sys.executable, "-c", ERRORS], text=True, capture_output=True, timeout=120, env=env)
    print(r.stdout, r.stderr[-2000:])
    check(r.returncode == 0 and "done" in r.stdout, "bad sampler input raises typed AtollErrors")

    head_dir = os.path.join(work, "head")
    head_log = open(os.path.join(work, "head.log"), "w")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--set",
                             "run.example=external", "--set", f"run.steps={STEPS}", "--set", "diloco.sync_every=10",
                             "--set", "diloco.fragments=2", "--set", "run.min_workers=2", "--set", "run.seed=3"],
                            stdout=head_log, stderr=subprocess.STDOUT)
    nodes = []
    try:
        endpoint = wait_for_endpoint(head_dir)
        records = [os.path.join(work, f"node{i}.indices") for i in range(2)]
        for i in range(2):
            log = open(os.path.join(work, f"node{i}.log"), "w")
            nodes.append((subprocess.Popen([sys.executable, "-c", NODE, endpoint, records[i],
                                            "ahead" if i == 0 else "in-step"],
                                           stdout=log, stderr=subprocess.STDOUT, env=env), log.name))
        for proc, log in nodes:
            proc.wait(timeout=300)
            text = open(log).read()
            print(text[-1500:])
            check(proc.returncode == 0 and "trained" in text, f"a Python node trains on the sampler's batches ({log})")
        check("asked ahead: invalid_config: a batch was asked for before" in open(nodes[0][1]).read(),
              "a batch asked for before the one before it was stepped raises InvalidConfig")

        trained = []
        for path in records:
            steps = [json.loads(line) for line in open(path)]
            check(len(steps) == STEPS and all(len(s) == BATCH for s in steps),
                  f"{path}: {STEPS} steps of {BATCH} indices ({len(steps)})")
            trained += [i for s in steps for i in s]
        check(len(trained) == len(set(trained)) and all(0 <= i < ITEMS for i in trained),
              "no index was trained twice in the run, and every one is the dataset's")

        ctl = os.path.join(os.path.dirname(atoll_bin), "atollctl")
        r = subprocess.run([ctl, "--head", endpoint, "data", "--json"], text=True, capture_output=True, timeout=60)
        data = json.loads(r.stdout)
        print(json.dumps(data)[:600])
        check(data["units"] == ITEMS and data["consumed"] + data["partial"] > 0,
              f"atollctl data counts the dataset's units and what the rounds learned ({data['consumed']})")
        ledger_path = os.path.join(work, "ledger.json")
        r = subprocess.run([atoll_bin, "export", "--run-dir", head_dir, "--out", os.path.join(work, "model.pt"),
                            "--ledger", ledger_path], text=True, capture_output=True, timeout=120)
        check(r.returncode == 0, "atoll export writes the ledger: " + r.stderr[-500:])
        learned = {}
        for epoch in json.load(open(ledger_path))["epochs"]:
            for c in epoch["consumed"]:
                learned.setdefault(c["fragment"], []).extend(c["units"])
        check(sorted(learned) == [0, 1], f"both fragments learned units ({sorted(learned)})")
        for f, units in learned.items():
            check(len(units) == len(set(units)), f"fragment {f}: no unit learned twice ({len(units)})")
            check(set(units) <= set(trained), f"fragment {f}: every unit learned is one a node trained")
    finally:
        stop_and_show(head, [proc for proc, _ in nodes], head_log)


if __name__ == "__main__":
    main()
