#!/usr/bin/env python3
"""The cost of atoll.DiLoCo in a user's loop: the same PyTorch loop, once plain and once
with diloco.step(), in the same run.

The loop trains an MLP (4 layers of width 1024, batch 256, AdamW, one compute thread) on
generated data. Each way runs in a fresh process, alternating, REPEATS times; the Atoll
way joins a head started here (`atoll up --set run.example=external`, one node, Streaming
DiLoCo over 4 fragments, H = 50, tau = 5, the default fp32 codec) as the only worker.
Reported, for each way, the median over repeats (and the best run) of:
  - s/step between syncs: the median step time (a sync touches a few steps of each 50);
  - wall s for all steps: first step to the end of the last, syncs included.
And the turn alone: diloco.step() on a tiny model (2000 steps, no sync), the hand-over to
the worker and back, which is all that Atoll adds to a step between syncs.

    ./tools/dev bench python [--steps 300] [--repeats 4] [--out DIR]

Writes OUT/results.json and OUT/table.md.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys

from benchlib import provenance  # tools/bench/benchlib, next to this script
from benchlib.cluster import wait_for_endpoint

LOOP = r"""
import json, statistics, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F
way, steps, head = sys.argv[1], int(sys.argv[2]), sys.argv[3]
torch.manual_seed(0)
torch.set_num_threads(1)
WIDTH, BATCH = 1024, 256
model = nn.Sequential(nn.Linear(64, WIDTH), nn.GELU(), nn.Linear(WIDTH, WIDTH), nn.GELU(),
                      nn.Linear(WIDTH, WIDTH), nn.GELU(), nn.Linear(WIDTH, 10))
inner = torch.optim.AdamW(model.parameters(), lr=1e-3)
if way == "atoll":
    import atoll
    node = atoll.join(head)
    diloco = atoll.DiLoCo(node, model, inner)
g = torch.Generator().manual_seed(1)
xs = torch.randn(64, BATCH, 64, generator=g)
ys = torch.randint(0, 10, (64, BATCH), generator=g)
times, forward_backward, optimizer = [], [], []
started = time.perf_counter()
for step in range(steps):
    t0 = time.perf_counter()
    loss = F.cross_entropy(model(xs[step % 64]), ys[step % 64])
    loss.backward()
    t1 = time.perf_counter()
    if way == "atoll":
        diloco.step(loss, samples=BATCH)  # the optimizer's step and the runtime's turn
    else:
        inner.step()
    t2 = time.perf_counter()
    inner.zero_grad()
    times.append(time.perf_counter() - t0)
    forward_backward.append(t1 - t0)
    optimizer.append(t2 - t1)
wall = time.perf_counter() - started
if way == "atoll":
    assert diloco.done, "the run should end with the loop"
    node.leave()
print(json.dumps({"way": way, "median_step_s": statistics.median(times), "wall_s": wall, "steps": len(times),
                  "forward_backward_s": statistics.median(forward_backward),
                  "optimizer_s": statistics.median(optimizer)}))
"""


# The turn itself: a step handed over and the worker back in train_step, with a model so
# small that nothing else is timed (no sync in the window).
HANDOFF = r"""
import json, statistics, sys, time
import torch
import atoll
torch.set_num_threads(1)
model = torch.nn.Sequential(*[torch.nn.Linear(4, 4) for _ in range(4)])  # 4 groups for 4 fragments
node = atoll.join(sys.argv[3])
diloco = atoll.DiLoCo(node, model, torch.optim.SGD(model.parameters(), lr=0.0))
times = []
for step in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    diloco.step(0.0)
    times.append(time.perf_counter() - t0)
node.leave()
print(json.dumps({"way": "handoff", "median_step_s": statistics.median(times), "wall_s": sum(times),
                  "steps": len(times)}))
"""


def run_way(way, steps, atoll_bin, package, work, index):
    # One compute thread, BLAS included: torch.set_num_threads(1) leaves OpenBLAS's own pool
    # at a thread per core, which then spins on the core the node's threads need.
    env = dict(os.environ, PYTHONPATH=package, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    head, endpoint = None, "-"
    if way != "plain":
        head_dir = os.path.join(work, f"head-{index}")
        shutil.rmtree(head_dir, ignore_errors=True)
        log = open(os.path.join(work, f"head-{index}.log"), "w")
        # The head belongs on another machine; here it shares the loop's two cores, niced so
        # that it takes what the loop leaves (its CPU time is reported).
        head = subprocess.Popen(["nice", "-n", "19", atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir,
                                 "--set", "run.example=external", "--set", "run.min_workers=1",
                                 "--set", f"run.steps={steps}", "--set", "diloco.fragments=4",
                                 "--set", "diloco.sync_every=50" if way == "atoll" else "diloco.sync_every=1000000",
                                 "--set", "diloco.overlap=5"],
                                stdout=log, stderr=subprocess.STDOUT)
        endpoint = wait_for_endpoint(head_dir, head, log=log.name)
    try:
        proc = subprocess.run([sys.executable, "-c", HANDOFF if way == "handoff" else LOOP, way, str(steps), endpoint],
                              env=env, text=True,
                              capture_output=True, timeout=1800)
        if proc.returncode != 0:
            print(proc.stderr[-3000:], file=sys.stderr)
            raise SystemExit(f"python_api: the {way} loop failed")
        return json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        if head is not None:
            head.terminate()
            head.wait(timeout=30)


def markdown(summary):
    """The loop plain and with atoll.DiLoCo, from results.json (tools/bench/report.py python DIR)."""
    p, a = summary["plain"], summary["atoll"]
    between, whole = summary["between_syncs"], summary["whole_run"]
    best_between, best_whole = summary["best_between_syncs"], summary["best_whole_run"]
    handoff_s = summary["handoff_s"]
    return "\n".join([
        f"| loop ({summary.get('steps', '?')} steps, {summary.get('repeats', '?')} runs each) | s / step between syncs, median (best) run |"
        " wall s for all steps, median (best) run |",
        "|---|---|---|",
        f"| plain PyTorch | {p['median_step_s']:.4f} ({p['best_step_s']:.4f}) | {p['wall_s']:.2f} ({p['best_wall_s']:.2f}) |",
        f"| with atoll.DiLoCo (H = 50, tau = 5, 4 fragments) | {a['median_step_s']:.4f} ({a['best_step_s']:.4f}) |"
        f" {a['wall_s']:.2f} ({a['best_wall_s']:.2f}) |",
        f"| Atoll's cost (goals: +3%, +5%) | {between:+.1%} ({best_between:+.1%}) | {whole:+.1%} ({best_whole:+.1%}) |",
        f"| the turn alone (diloco.step() of a tiny model, median of 2000) | {handoff_s * 1e6:.0f} us |"
        f" {handoff_s / p['median_step_s']:.2%} of a plain step |",
        "",
        "| way | forward + backward s (median of medians) | optimizer step s (with the turn for Atoll) |",
        "|---|---|---|",
        f"| plain PyTorch | {p['forward_backward_s']:.4f} | {p['optimizer_s']:.4f} |",
        f"| with atoll.DiLoCo | {a['forward_backward_s']:.4f} | {a['optimizer_s']:.4f} |",
    ])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--package", required=True, help="folder holding the atoll package (BUILD/python)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--repeats", type=int, default=4)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "python")  # run.json: command, date, machine, revision
    runs = {"plain": [], "atoll": []}
    for r in range(args.repeats):
        for way in ("plain", "atoll"):
            result = run_way(way, args.steps, args.atoll, args.package, args.out, r)
            print(result, flush=True)
            runs[way].append(result)
    summary = {way: {"median_step_s": statistics.median(x["median_step_s"] for x in rs),
                     "forward_backward_s": statistics.median(x["forward_backward_s"] for x in rs),
                     "optimizer_s": statistics.median(x["optimizer_s"] for x in rs),
                     "wall_s": statistics.median(x["wall_s"] for x in rs),
                     "best_step_s": min(x["median_step_s"] for x in rs),
                     "best_wall_s": min(x["wall_s"] for x in rs), "runs": rs} for way, rs in runs.items()}
    handoff = run_way("handoff", 2000, args.atoll, args.package, args.out, "handoff")
    print(handoff, flush=True)
    summary["handoff_s"] = handoff["median_step_s"]
    p, a = summary["plain"], summary["atoll"]
    summary["between_syncs"] = a["median_step_s"] / p["median_step_s"] - 1
    summary["whole_run"] = a["wall_s"] / p["wall_s"] - 1
    summary["best_between_syncs"] = a["best_step_s"] / p["best_step_s"] - 1
    summary["best_whole_run"] = a["best_wall_s"] / p["best_wall_s"] - 1
    summary["steps"], summary["repeats"] = args.steps, args.repeats
    table = markdown(summary)
    print(table)
    json.dump(summary, open(os.path.join(args.out, "results.json"), "w"), indent=1)
    open(os.path.join(args.out, "table.md"), "w").write(table + "\n")


if __name__ == "__main__":
    main()
