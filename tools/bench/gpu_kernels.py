#!/usr/bin/env python3
"""Where a GPU step's time goes: the kernels of the Atoll worker against PyTorch eager.

Nsight Compute (ncu) times every kernel of a window of steady-state steps, once in the
Atoll worker (`atoll local --nodes 1 --devices cuda:0`, no round in the window) and once
in gpu_step.py's eager loop (same GPT, batch, bf16 autocast, fused AdamW). ncu runs the
kernels one at a time, so the sums are GPU work per step without gaps; set next to each
loop's wall time per step (gpu_step.py), the difference is time the GPU waited on the host.

Steps are counted by the loss's kernel (one `nll_loss_forward` launch a step). Prints one
table per run: kernels by total time, then the totals per step.

    python3 tools/bench/gpu_kernels.py --atoll build-gpu/tools/atoll --out build-gpu/bench

Needs ncu on the PATH (Nsight Compute; it reads no hardware counter here, only kernel
durations, with --clock-control none so clocks stay as they are).
"""
import argparse
import collections
import csv
import io
import os
import signal
import subprocess
import sys

STEP_MARKER = "nll_loss_forward"
UNITS = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0}


def ncu(cmd, skip, count, timeout):
    """Kernel name and duration in seconds of launches skip .. skip + count of cmd; None
    when ncu fails or runs past `timeout` seconds (the other run still gets its turn)."""
    full = ["ncu", "--clock-control", "none", "--target-processes", "all", "--csv", "--metrics",
            "gpu__time_duration.sum", "--launch-skip", str(skip), "--launch-count", str(count)] + cmd
    # A session of its own, so that a run past its time goes with everything it started.
    proc = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        print(f"gpu_kernels: ncu ran past {timeout} s on {' '.join(cmd[:3])}; its last output:\n{out[-2000:]}"
              f"\n{err[-2000:]}", file=sys.stderr)
        return None
    if proc.returncode != 0:
        print(f"{err[-3000:]}\ngpu_kernels: ncu failed on {' '.join(cmd[:3])}", file=sys.stderr)
        return None
    # ncu prints the program's own output first; the CSV starts at its header row.
    text = out[out.find('"ID"'):]
    kernels = []
    for row in csv.DictReader(io.StringIO(text)):
        if row.get("Metric Name") == "gpu__time_duration.sum":
            value = float(row["Metric Value"].replace(",", ""))
            kernels.append((row["Kernel Name"], value * UNITS.get(row["Metric Unit"], 1e-9)))
    return kernels


def summarise(name, kernels, top):
    steps = sum(1 for k, _ in kernels if STEP_MARKER in k)
    if steps == 0:
        raise SystemExit(f"gpu_kernels: no {STEP_MARKER} kernel in {name}'s window")
    by_name = collections.defaultdict(lambda: [0, 0.0])
    for k, t in kernels:
        by_name[k][0] += 1
        by_name[k][1] += t
    total = sum(t for _, t in kernels)
    lines = [f"### {name}: {len(kernels)} kernels over {steps} steps, {total / steps * 1e3:.2f} ms of kernels a step,"
             f" {len(kernels) / steps:.0f} launches a step", "",
             "| kernel | launches / step | ms / step | share |", "|---|---|---|---|"]
    for k, (n, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:top]:
        lines.append(f"| `{k[:90]}` | {n / steps:.1f} | {t / steps * 1e3:.3f} | {t / total:.1%} |")
    return "\n".join(lines), {"steps": steps, "kernels": len(kernels), "ms_per_step": total / steps * 1e3}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--skip", type=int, default=20000, help="launches before the window (start-up, warm-up)")
    ap.add_argument("--count", type=int, default=4000, help="launches timed")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--timeout", type=int, default=150, help="seconds for each run under ncu")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    here = os.path.dirname(os.path.abspath(__file__))
    run_dir = os.path.join(args.out, "kernels-atoll")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    atoll = [args.atoll, "local", "--nodes", "1", "--devices", "cuda:0", "--config", "examples/configs/gpt-gpu.toml",
             "--steps", "120", "--run-dir", run_dir, "--set", "run.eval_every=1000000", "--set",
             "diloco.sync_every=1000000", "--set", "diloco.overlap=0"]
    eager = [sys.executable, "-c", f"import sys; sys.path.insert(0, {here!r}); import gpu_step; "
             "gpu_step.pytorch_eager(120, 10, lagged=True)"]
    report, totals = [], {}
    for name, cmd in [("pytorch eager", eager), ("atoll worker", atoll)]:
        kernels = ncu(cmd, args.skip, args.count, args.timeout)
        if kernels is None:
            continue
        table, totals[name] = summarise(name, kernels, args.top)
        print(table + "\n", flush=True)
        report.append(table)
    if len(totals) < 2:
        raise SystemExit("gpu_kernels: no comparison (a run above failed)")
    a, e = totals["atoll worker"], totals["pytorch eager"]
    summary = (f"Kernels a step: Atoll {a['ms_per_step']:.2f} ms in {a['kernels'] / a['steps']:.0f} launches, "
               f"eager {e['ms_per_step']:.2f} ms in {e['kernels'] / e['steps']:.0f} launches "
               f"(Atoll / eager {a['ms_per_step'] / e['ms_per_step']:.2f}x).")
    print(summary)
    with open(os.path.join(args.out, "kernels.md"), "w") as f:
        f.write(summary + "\n\n" + "\n\n".join(report) + "\n")


if __name__ == "__main__":
    main()
