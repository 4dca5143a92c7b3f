#!/usr/bin/env python3
"""Warm against cold joiners: a node joins a run at 30% of its steps, once taking a live
peer's inner-optimizer state (AdamW's moments and step; inner.warm_start = true, the
default) and once starting with fresh state (false). Same model, seed, config and join
step; real processes (`atoll up`, two `atoll join`).

For each run it reports
  - the held-out loss of theta_global at the end (rank 0's last evaluation);
  - the joiner's training loss over its first 50 steps, against its peer's at the same
    steps (the excess a cold AdamW pays while its moments build up);
  - the joiner's log line on how it started (warm, from whom; or cold, why).
Writes OUT/results.json and OUT/table.md.

Usage: tools/bench/warm_join.py --atoll build/tools/atoll [--out DIR] [--steps 600]
       [--join-at 0.3] [--seeds 1,2]
"""
import argparse
import json
import os
import re
import shutil
import time

from benchlib import cluster, provenance  # tools/bench/benchlib, next to this script
from benchlib.metrics import read_lines

CONFIG = ["--set", "diloco.sync_every=20", "--set", "run.min_workers=1"]


def newest_step(path, worker):
    steps = [l["step"] for l in read_lines(path) if l["type"] == "step" and l["worker"] == worker]
    return max(steps, default=0)


def run(args, warm, seed):
    name = f"{'warm' if warm else 'cold'}-seed{seed}"
    run_dir = os.path.join(args.out, name)
    shutil.rmtree(run_dir, ignore_errors=True)  # an old run dir would be resumed
    os.makedirs(run_dir)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    head, endpoint = cluster.start_head(
        args.atoll, run_dir, ["--metrics", metrics, "--set", f"run.steps={args.steps}", "--set", f"run.seed={seed}",
                              "--set", f"run.eval_every={args.steps // 4}",
                              "--set", f"inner.warm_start={str(warm).lower()}"] + CONFIG)
    join = ["--threads", "1"]
    first = cluster.join(args.atoll, endpoint, os.path.join(run_dir, "logs", "node1.log"), join)
    join_step = int(args.steps * args.join_at)
    while newest_step(metrics, "worker/1.0") < join_step:
        if first.poll() is not None:
            raise RuntimeError(f"node 1 ended before step {join_step}; see {run_dir}/logs/node1.log")
        time.sleep(0.2)
    joined_at = newest_step(metrics, "worker/1.0")
    second = cluster.join(args.atoll, endpoint, os.path.join(run_dir, "logs", "node2.log"), join)
    for p in (first, second):
        if p.wait(timeout=3600) != 0:
            raise RuntimeError(f"a node failed; see {run_dir}")
    cluster.stop(args.atoll, endpoint, [head], timeout=30)

    lines = read_lines(metrics)
    evals = [l for l in lines if l["type"] == "eval"]
    final = max(evals, key=lambda l: (l["step"], l["time"]))
    loss = {(l["worker"], l["step"]): l["loss"] for l in lines if l["type"] == "step"}
    joiner_steps = sorted(s for w, s in loss if w == "worker/2.0")
    early = [s for s in joiner_steps[:5] if ("worker/1.0", s) in loss]  # reports every 10 steps: its first 50
    excess = [loss[("worker/2.0", s)] - loss[("worker/1.0", s)] for s in early]
    start_line = next((l.strip() for l in open(os.path.join(run_dir, "logs", "node2.log"))
                       if re.search(r"worker/2\.0: starting at step", l)), "")
    return {
        "name": name, "warm": warm, "seed": seed, "steps": args.steps, "joined_at_step": joined_at,
        "joiner_first_step": joiner_steps[0] if joiner_steps else None,
        "val_loss": final["val_loss"], "val_step": final["step"],
        "joiner_excess_first_50": sum(excess) / len(excess) if excess else None,
        "joiner_losses": [loss[("worker/2.0", s)] for s in early],
        "peer_losses": [loss[("worker/1.0", s)] for s in early],
        "start_line": start_line,
    }


def markdown(results):
    """The table of results.json's rows (tools/bench/report.py warm-join DIR)."""
    rows = ["| run | joined at step | held-out loss at the end | joiner's loss above its peer's, first 50 steps |",
            "|---|---|---|---|"]
    for r in results:
        excess = f"{r['joiner_excess_first_50']:+.3f}" if r["joiner_excess_first_50"] is not None else "-"
        rows.append(f"| {r['name']} | {r['joined_at_step']} | {r['val_loss']:.4f} | {excess} |")
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", default="build/bench/warm_join")
    ap.add_argument("--steps", type=int, default=600)
    ap.add_argument("--join-at", type=float, default=0.3)
    ap.add_argument("--seeds", default="1")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "warm-join")  # run.json: command, date, machine, revision
    results = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for warm in (True, False):
            r = run(args, warm, seed)
            print(json.dumps(r), flush=True)
            results.append(r)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    table = markdown(results) + "\n"
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(table)
    print(table)
    for r in results:
        print(f"{r['name']}: {r['start_line']}")


if __name__ == "__main__":
    main()
