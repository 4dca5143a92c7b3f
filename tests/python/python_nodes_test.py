#!/usr/bin/env python3
"""Python nodes (the atoll package) in real processes, against a real head:

1. errors before anything starts: a bad head address, a node with no head to answer
   (Timeout), a model Atoll cannot sync in place or with fewer groups than the run has
   fragments (InvalidConfig), each raised as its AtollError subclass without crashing the
   process;
2. a head with run.example = external and two Python nodes running
   examples/python/classifier.py: both finish, hold bit-identical parameters, and reach a
   held-out loss within 3% of the same loop in plain PyTorch (classifier_plain.py, same
   steps) with DiLoCo done by hand (2 replicas, H = 50), and of one process training on
   the whole training set;
3. while they train: a Python node with another model is refused with ModelMismatch naming
   the first difference, and a C++ `atoll join` is refused with model_mismatch;
4. `atoll export` writes a state dict that the model's load_state_dict takes, holding the
   nodes' final parameters bit for bit.

Usage: python_nodes_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys

from checks import EXPECT_TYPED, check, last_json, wait_for_text
from head_endpoint import stop_all, stop_and_show, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
EXAMPLE = os.path.join(ROOT, "examples", "python")
STEPS = 600


def python(code_or_script, *args, env, timeout=300):
    cmd = [sys.executable] + (["-c", code_or_script] if "\n" in code_or_script else [code_or_script]) + list(args)
    return subprocess.run(cmd, text=True, capture_output=True, timeout=timeout, env=env)


ERRORS = EXPECT_TYPED + """
import torch
expect(atoll.InvalidConfig, lambda: atoll.join("http://nowhere"))
model = torch.nn.Sequential(torch.nn.Linear(4, 4))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
node = atoll.join("tcp://127.0.0.1:1", wait_for_head=2)
expect(atoll.Timeout, lambda: atoll.DiLoCo(node, model, opt))
half = torch.nn.Sequential(torch.nn.Linear(4, 4).half())
expect(atoll.InvalidConfig, lambda: atoll.DiLoCo(atoll.join("tcp://127.0.0.1:1"), half, opt))
expect(atoll.NotReady, lambda: atoll.join("tcp://127.0.0.1:1").rank)
expect(atoll.InvalidConfig, lambda: atoll.join("tcp://127.0.0.1:1", group=object()))  # no torch.distributed yet
import os, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
expect(atoll.InvalidConfig, lambda: atoll.join("tcp://127.0.0.1:1", group="world"))  # not a process group
FullyShardedDataParallel = type("FullyShardedDataParallel", (torch.nn.Linear,), {})  # FSDP, as atoll sees it
expect(atoll.InvalidConfig, lambda: atoll.DiLoCo(atoll.join("tcp://127.0.0.1:1", group=dist.group.WORLD),
                                                 FullyShardedDataParallel(4, 4), opt))
print("done")
"""

# A node whose model the run refuses: `model` is built by the given lines, and the
# exception the script expects is `kind`.
REFUSED = """
import sys, atoll, torch
sys.path.insert(0, sys.argv[2])
import blobs
{model}
node = atoll.join(sys.argv[1], wait_for_head=30)
try:
    atoll.DiLoCo(node, model, torch.optim.SGD(model.parameters(), lr=0.1), timeout=60)
except atoll.{kind} as e:
    print("refused:", e)
    sys.exit(0)
sys.exit("not refused")
"""
TOO_FEW_GROUPS = REFUSED.format(kind="InvalidConfig",
                                model="model = torch.nn.Linear(4, 4)  # one group, for a run of 3 fragments")
MISMATCH = REFUSED.format(kind="ModelMismatch", model="""
blobs.HIDDEN = 64  # another model: fc1 is 64 x 32, not 128 x 32
model = blobs.Classifier()""")


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package + os.pathsep + os.environ.get("PYTHONPATH", ""))

    r = python(ERRORS, env=env)
    print(r.stdout, r.stderr[-2000:])
    check(r.returncode == 0 and "done" in r.stdout, "bad input raises typed AtollErrors and the process lives on")

    # A model with fewer groups than the run has fragments: one clear error, no restarts.
    small_dir = os.path.join(work, "small-head")
    small = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", small_dir, "--set",
                              "run.example=external", "--set", "diloco.fragments=3", "--set", "run.min_workers=1"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        r = python(TOO_FEW_GROUPS, wait_for_endpoint(small_dir), EXAMPLE, env=env, timeout=120)
        print(r.stdout, r.stderr[-1500:])
        check(r.returncode == 0 and "layer groups" in r.stdout,
              "a model with fewer groups than fragments raises InvalidConfig saying so")
    finally:
        stop_all(small, [])

    head_dir = os.path.join(work, "head")
    head_log = open(os.path.join(work, "head.log"), "w")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--set",
                             "run.example=external", "--set", f"run.steps={STEPS}", "--set", "diloco.sync_every=50",
                             "--set", "diloco.fragments=3", "--set", "run.min_workers=2",
                             # Plain averaging: on this easy task the default outer Nesterov
                             # step (lr 0.7, momentum 0.9) inflates the logits (README).
                             "--set", "diloco.outer_lr=1", "--set", "diloco.outer_momentum=0"],
                            stdout=head_log, stderr=subprocess.STDOUT)
    nodes = []
    try:
        endpoint = wait_for_endpoint(head_dir)
        for i in range(2):
            log = open(os.path.join(work, f"node{i}.log"), "w")
            nodes.append((subprocess.Popen([sys.executable, os.path.join(EXAMPLE, "classifier.py"), "--head", endpoint],
                                           stdout=log, stderr=subprocess.STDOUT, env=env), log.name))
        # While they train (both joined: the first node's model is the run's), another
        # model, from Python and from C++.
        for _, log in nodes:
            check(wait_for_text(log, "node rank", 120), f"a Python node joins ({log})")
        r = python(MISMATCH, endpoint, EXAMPLE, env=env, timeout=120)
        print(r.stdout, r.stderr[-1500:])
        check(r.returncode == 0 and "parameter 1 is 'fc1.weight' float32 64x32 in group 0" in r.stdout,
              "a Python node with another model is refused with ModelMismatch naming the first difference")
        r = subprocess.run([atoll_bin, "join", "--head", endpoint, "--no-listen", "--wait-for-head", "30"], text=True,
                           capture_output=True, timeout=120)
        check(r.returncode != 0 and "model_mismatch" in r.stderr, "a C++ node is refused from an external run")

        results = []
        for proc, log in nodes:
            proc.wait(timeout=600)
            text = open(log).read()
            print(text[-1500:])
            check(proc.returncode == 0, f"a Python node trains to the end ({log})")
            results.append(last_json(text))
        check(all(r and r["steps"] == STEPS for r in results), f"each node took {STEPS} steps")
        head_log.flush()
        check(re.search(r"step 200 held-out loss [0-9.]+\n", open(os.path.join(work, "head.log")).read()),
              "the held-out loss that rank 0's loop measured at step 200 reaches the head")
        check(results[0]["digest"] == results[1]["digest"],
              f"both nodes end with bit-identical parameters ({results[0]['digest']})")
        plain = last_json(python(os.path.join(EXAMPLE, "classifier_plain.py"), "--steps", str(STEPS), env=env).stdout)
        by_hand = last_json(python(os.path.join(EXAMPLE, "classifier_plain.py"), "--steps", str(STEPS), "--replicas",
                                   "2", "--sync-every", "50", "--outer-lr", "1", "--outer-momentum", "0",
                                   env=env).stdout)
        ours = results[0]["held_out_loss"]
        print(f"held-out loss: Atoll (2 Python nodes, Streaming DiLoCo H=50) {ours:.4f}, DiLoCo by hand in plain "
              f"PyTorch (2 replicas, H=50) {by_hand['held_out_loss']:.4f}, one process on all the data "
              f"{plain['held_out_loss']:.4f}")
        check(ours <= by_hand["held_out_loss"] * 1.03,
              "the held-out loss is within 3% of DiLoCo done by hand in plain PyTorch")
        check(ours <= plain["held_out_loss"] * 1.03, "and within 3% of one process training on all the data")

        out = os.path.join(work, "trained.pt")
        r = subprocess.run([atoll_bin, "export", "--run-dir", head_dir, "--out", out, "--json"], text=True,
                           capture_output=True, timeout=120)
        check(r.returncode == 0 and json.loads(r.stdout)["format"] == "state_dict",
              "atoll export writes the run's model as a state dict: " + r.stderr.strip())
        load = (f"import sys, torch; sys.path.insert(0, {EXAMPLE!r}); import blobs; m = blobs.Classifier(); "
                f"m.load_state_dict(torch.load({out!r})); print(blobs.parameter_digest(m))")
        r = subprocess.run([sys.executable, "-c", load], text=True, capture_output=True, timeout=120, env=env)
        check(r.returncode == 0 and r.stdout.strip() == results[0]["digest"],
              "load_state_dict takes the export, and it holds the nodes' final parameters "
              f"({r.stdout.strip()} {r.stderr[-300:]})")
    finally:
        stop_and_show(head, [proc for proc, _ in nodes], head_log)


if __name__ == "__main__":
    main()
