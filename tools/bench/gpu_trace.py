#!/usr/bin/env python3
"""Where a GPU step's time goes: PyTorch profiler (Kineto) traces of the Atoll worker and
of PyTorch eager, the same window of steady-state steps of the same GPT, side by side.

The worker traces itself (ATOLL_TORCH_PROFILE=FIRST:COUNT:FILE, training/step_profile.hpp)
in `atoll local --nodes 1 --devices cuda:0` with no round; eager is gpu_step.py's loop
(loss read one step late, as the worker does) under torch.profiler. Both traces count:

- GPU time a step: kernels, copies and memsets, and the time the GPU idled inside the
  window (the union of device intervals against the window's span);
- kernels by total time, with launches a step, matched by name across the two runs;
- CUDA runtime calls on the host (launches, copies, synchronisations, allocations);
- host ops (aten::) by calls a step, where the two loops differ.

Steps are counted by the loss's kernel (one `nll_loss_forward` launch a step).

    python3 tools/bench/gpu_trace.py --atoll build-gpu/tools/atoll --out build-gpu/bench/trace

Writes OUT/trace.md (the tables), OUT/trace.json (the figures) and both traces gzipped.
"""
import argparse
import collections
import gzip
import json
import os
import shutil

import gpu_step

STEP_MARKER = "nll_loss_forward"
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver"}


def load(path):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    return [e for e in events if e.get("ph") == "X" and "dur" in e]


def busy_time(intervals):
    """The length of the union of (start, end) intervals."""
    total, end = 0.0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def gaps(intervals, threshold_us):
    """Idle stretches between device intervals longer than threshold_us: (count, total us)."""
    count, total, end = 0, 0.0, None
    for s, e in sorted(intervals):
        if end is not None and s - end > threshold_us:
            count += 1
            total += s - end
        end = e if end is None else max(end, e)
    return count, total


def summarise(events):
    device = [e for e in events if e.get("cat") in DEVICE_CATS]
    kernels = [e for e in device if e["cat"] == "kernel"]
    steps = sum(1 for e in kernels if STEP_MARKER in e["name"])
    if steps == 0:
        raise SystemExit(f"gpu_trace: no {STEP_MARKER} kernel in the trace")
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in device]
    window = max(e for _, e in spans) - min(s for s, _ in spans)
    busy = busy_time(spans)
    big_gaps = gaps(spans, 50.0)

    def by_name(items, weight):
        table = collections.defaultdict(lambda: [0, 0.0])
        for e in items:
            table[e["name"]][0] += 1
            table[e["name"]][1] += weight(e)
        return {k: (n / steps, t / steps / 1e3) for k, (n, t) in table.items()}  # per step: count, ms

    host_ops = [e for e in events if e.get("cat") == "cpu_op"]
    return {
        "steps": steps,
        "ms_per_step_window": window / steps / 1e3,
        "ms_per_step_busy": busy / steps / 1e3,
        "ms_per_step_idle": (window - busy) / steps / 1e3,
        "idle_gaps_over_50us_per_step": big_gaps[0] / steps,
        "ms_per_step_in_gaps_over_50us": big_gaps[1] / steps / 1e3,
        "ms_per_step_kernels": sum(e["dur"] for e in kernels) / steps / 1e3,
        "ms_per_step_memcpy": sum(e["dur"] for e in device if e["cat"] == "gpu_memcpy") / steps / 1e3,
        "ms_per_step_memset": sum(e["dur"] for e in device if e["cat"] == "gpu_memset") / steps / 1e3,
        "launches_per_step": len(kernels) / steps,
        "kernels": by_name(kernels, lambda e: e["dur"]),
        "copies": by_name([e for e in device if e["cat"] != "kernel"], lambda e: e["dur"]),
        "runtime": by_name([e for e in events if e.get("cat") in RUNTIME_CATS], lambda e: e["dur"]),
        "host_ops": by_name(host_ops, lambda e: e["dur"]),
    }


def side_by_side(title, atoll, eager, key, top, sort_by):
    names = set(atoll[key]) | set(eager[key])
    rows = sorted(names, key=lambda n: -max(atoll[key].get(n, (0, 0))[sort_by], eager[key].get(n, (0, 0))[sort_by]))
    lines = [f"### {title}", "", "| name | Atoll / step | Atoll ms / step | eager / step | eager ms / step |",
             "|---|---|---|---|---|"]
    for n in rows[:top]:
        a, e = atoll[key].get(n, (0, 0.0)), eager[key].get(n, (0, 0.0))
        lines.append(f"| `{n[:100]}` | {a[0]:.1f} | {a[1]:.3f} | {e[0]:.1f} | {e[1]:.3f} |")
    return "\n".join(lines)


def differing_host_ops(atoll, eager, top):
    """Host ops whose calls a step differ most between the two loops."""
    names = set(atoll["host_ops"]) | set(eager["host_ops"])
    diff = sorted(names, key=lambda n: -abs(atoll["host_ops"].get(n, (0, 0))[0] - eager["host_ops"].get(n, (0, 0))[0]))
    lines = ["### Host ops whose calls a step differ most", "",
             "| op | Atoll calls / step | Atoll ms / step | eager calls / step | eager ms / step |", "|---|---|---|---|---|"]
    for n in diff[:top]:
        a, e = atoll["host_ops"].get(n, (0, 0.0)), eager["host_ops"].get(n, (0, 0.0))
        lines.append(f"| `{n[:80]}` | {a[0]:.1f} | {a[1]:.3f} | {e[0]:.1f} | {e[1]:.3f} |")
    return "\n".join(lines)


def gzip_to(src, dst):
    with open(src, "rb") as i, gzip.open(dst, "wb") as o:
        shutil.copyfileobj(i, o)
    os.remove(src)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--model", choices=sorted(gpu_step.MODELS), default="gpu")
    ap.add_argument("--first", type=int, default=40, help="the first traced step (after warm-up)")
    ap.add_argument("--count", type=int, default=20, help="traced steps")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    shape = gpu_step.MODELS[args.model]
    steps = args.first + args.count + 5
    eager_trace = os.path.join(args.out, "eager-trace.json")
    atoll_trace = os.path.abspath(os.path.join(args.out, "atoll-trace.json"))
    for p in (eager_trace, atoll_trace):
        if os.path.exists(p):
            os.remove(p)

    eager_s = gpu_step.pytorch_eager(steps, args.first, lagged=True, shape=shape,
                                     profile=(args.first, args.count, eager_trace))
    print(f"gpu_trace: eager traced, {eager_s:.4f} s/step over the window (profiler on)", flush=True)
    run = gpu_step.atoll_run(args.atoll, args.out, "atoll-traced", steps,
                             gpu_step.RUNS["none"][2] + gpu_step.shape_sets(shape),
                             env={"ATOLL_TORCH_PROFILE": f"{args.first}:{args.count}:{atoll_trace}"})
    print(f"gpu_trace: Atoll traced, {run['s_per_step']:.4f} s/step (median of its reports from step 20)", flush=True)
    if not os.path.exists(atoll_trace):
        raise SystemExit(f"gpu_trace: the worker wrote no trace at {atoll_trace} (see {args.out}/atoll-traced)")

    atoll, eager = summarise(load(atoll_trace)), summarise(load(eager_trace))
    totals = ["steps", "ms_per_step_window", "ms_per_step_busy", "ms_per_step_idle", "idle_gaps_over_50us_per_step",
              "ms_per_step_in_gaps_over_50us", "ms_per_step_kernels", "ms_per_step_memcpy", "ms_per_step_memset",
              "launches_per_step"]
    lines = [f"## Traces of steps {args.first} to {args.first + args.count - 1}, model {args.model} {shape}", "",
             "| per step | Atoll | eager |", "|---|---|---|"]
    lines += [f"| {k} | {atoll[k]:.3f} | {eager[k]:.3f} |" for k in totals]
    report = "\n\n".join(["\n".join(lines),
                          side_by_side("Kernels by time", atoll, eager, "kernels", args.top, 1),
                          side_by_side("Copies and memsets", atoll, eager, "copies", 10, 1),
                          side_by_side("CUDA runtime calls (host)", atoll, eager, "runtime", 15, 1),
                          differing_host_ops(atoll, eager, args.top)])
    print(report)
    open(os.path.join(args.out, "trace.md"), "w").write(report + "\n")
    json.dump({"atoll": atoll, "eager": eager, "eager_s_per_step": eager_s, "atoll_run": run},
              open(os.path.join(args.out, "trace.json"), "w"), indent=1)
    gzip_to(atoll_trace, atoll_trace + ".gz")
    gzip_to(eager_trace, eager_trace + ".gz")


if __name__ == "__main__":
    main()
