#!/usr/bin/env python3
"""Quality versus bytes: data-parallel against DiLoCo, Streaming DiLoCo and SparseLoCo.

Runs the default example (byte-level GPT on tinyshakespeare) once per configuration
with `atoll local`: the same model, workers, steps and seeds each time. Then it writes
  OUT/results.json  one object per run (name, profile, mode, fragments, overlap, codec,
                    workers, steps, val_loss, bytes_sent_per_worker, bytes_received_per_worker,
                    peak_round_bytes, wall_s, ...)
  OUT/table.md      held-out loss, bytes sent and received per worker, the largest upload
                    of one worker in one round, and ratios to data-parallel
  OUT/loss.png      held-out loss against steps and against bytes sent + received per worker
                    (log scale), every configuration

bytes_sent_per_worker / bytes_received_per_worker: every byte a worker sent / received
(contributions and results, state transfers, reports). bytes_per_worker is the sent figure,
kept for older readers of results.json.
peak_round_bytes: the largest bytes one worker uploaded in a single round (coordinator's
received bytes of a round divided by its participants).
profile: quick (every configuration, 600 steps) or long (data-parallel, the best dense and
the best sparse configurations, LONG_STEPS steps).
Usage: tools/bench/quality.py --atoll build/tools/atoll [--profile quick|long] [--out DIR] [--steps N]
                              [--only NAME,...] [--reuse]
"""
import argparse
import json
import os
import subprocess
import sys
import time

from benchlib import provenance  # tools/bench/benchlib, next to this script
from benchlib.metrics import read_lines

# name, extra `atoll local` arguments, mode, fragments, overlap, codec.
# DiLoCo runs use H = 20 inner steps per round of a fragment; Streaming splits the GPT's
# layer groups (embeddings, 4 blocks, final norm) strided into P fragments, overlaps the
# sync with tau = 5 steps and merges with alpha = 0.5.
H = ["--set", "diloco.sync_every=20"]
OVERLAP = ["--set", "diloco.overlap=5", "--set", "diloco.alpha=0.5", "--set", "diloco.error_feedback=true"]
RUNS = [
    ("ddp", ["--set", "run.mode=ddp"], "ddp", 1, 0, "fp32"),
    ("diloco", H, "diloco", 1, 0, "fp32"),
    ("streaming", H + ["--set", "diloco.fragments=3"], "diloco", 3, 0, "fp32"),
    ("streaming-overlap-int8-ef", H + ["--set", "diloco.fragments=3", "--set", "diloco.codec=int8"] + OVERLAP,
     "diloco", 3, 5, "int8"),
    ("streaming-overlap-fp4-ef", H + ["--set", "diloco.fragments=3", "--set", "diloco.codec=fp4"] + OVERLAP,
     "diloco", 3, 5, "fp4"),
    ("streaming-p2-overlap-fp4-ef", H + ["--set", "diloco.fragments=2", "--set", "diloco.codec=fp4"] + OVERLAP,
     "diloco", 2, 5, "fp4"),
    # The dense codec at the sparse rows' longer H: where fp4 lands near 400x.
    ("streaming-overlap-fp4-ef-h50", ["--set", "diloco.sync_every=50", "--set", "diloco.fragments=3",
                                      "--set", "diloco.codec=fp4"] + OVERLAP, "diloco", 3, 5, "fp4"),
]
# The sparse codecs (runtime/algorithm/codec.hpp): 1/16 and 1/32 of each chunk, at H = 20 and 50.
# Their error feedback holds most of each round's change for later rounds, so they run
# without outer momentum (lr 1) and merge with alpha = 0: outer momentum 0.9 diverged
# (5.58 at step 600) and alpha = 0.5 counts what is held back twice (2.285 against 2.186).
SPARSE = ["--set", "diloco.overlap=5", "--set", "diloco.alpha=0", "--set", "diloco.error_feedback=true",
          "--set", "diloco.outer_momentum=0", "--set", "diloco.outer_lr=1.0"]
for density in (16, 32):
    for h in (20, 50):
        RUNS.append((f"streaming-overlap-topk{density}-ef-h{h}",
                     ["--set", f"diloco.sync_every={h}", "--set", "diloco.fragments=3",
                      "--set", f"diloco.codec=topk{density}"] + SPARSE,
                     "diloco", 3, 5, f"topk{density}"))
# Results at the size of the union of the two workers' supports: each sends 1/32 of a
# chunk, the coordinator 1/16 (diloco.result_codec), so the average's values are not held
# back a second time in the coordinator's residual. The codec column reads up/down.
for h in (20, 50):
    RUNS.append((f"streaming-overlap-topk32-down16-ef-h{h}",
                 ["--set", f"diloco.sync_every={h}", "--set", "diloco.fragments=3",
                  "--set", "diloco.codec=topk32", "--set", "diloco.result_codec=topk16"] + SPARSE,
                 "diloco", 3, 5, "topk32/topk16"))

# SparseLoCo (diloco.outer = sparseloco, arXiv 2508.15706): no outer momentum (lr 1, the
# paper's), each worker's error feedback decayed by beta = 0.95 stands in for it; alpha = 0.
# Results go down at the density of the union of the two workers' supports (twice the
# contributions'), as in the down16 rows above.
SPARSELOCO = ["--set", "diloco.alpha=0", "--set", "diloco.outer=sparseloco",
              "--set", "diloco.outer_lr=1.0"]
# tau0: no overlap. With alpha = 0 a merge tau steps after the sync drops those tau steps'
# training of the fragment (they are in neither the contribution nor the accumulator);
# carry: the overlap, with each merge keeping them (diloco.carry_overlap).
for name, up, down, h, tau, carry, beta in (
        ("sparseloco-topk32-down16-h20", 32, 16, 20, 5, False, 0.95),
        ("sparseloco-topk16-h20", 16, 16, 20, 5, False, 0.95),
        ("sparseloco-topk32-down16-h50", 32, 16, 50, 5, False, 0.95),
        ("sparseloco-topk32-down16-h20-tau0", 32, 16, 20, 0, False, 0.95),
        ("sparseloco-topk32-down16-h20-carry", 32, 16, 20, 5, True, 0.95),
        ("sparseloco-topk16-h20-tau0", 16, 16, 20, 0, False, 0.95),
        ("sparseloco-topk32-down16-h20-tau0-beta0.9", 32, 16, 20, 0, False, 0.9),
        # Past 1000x: half the kept values each way at H = 20, or the same at H = 50.
        ("sparseloco-topk64-down32-h20-tau0", 64, 32, 20, 0, False, 0.95),
        ("sparseloco-topk32-down16-h50-tau0", 32, 16, 50, 0, False, 0.95)):
    RUNS.append((name, ["--set", f"diloco.sync_every={h}", "--set", "diloco.fragments=3",
                        "--set", f"diloco.codec=topk{up}", "--set", f"diloco.result_codec=topk{down}"] + SPARSELOCO +
                 ["--set", f"diloco.overlap={tau}", "--set", f"diloco.sparseloco_beta={beta}"] +
                 (["--set", "diloco.carry_overlap=true"] if carry else []),
                 "diloco", 3, tau, f"topk{up}" if up == down else f"topk{up}/topk{down}"))

# The long profile: the horizon where most of what a sparse run learned has left the
# residuals. Data-parallel, the best dense and the best sparse configurations of the quick
# profile, at LONG_STEPS steps: 2.5 times the quick profile's horizon, in about an hour on
# the 2-core Xeon of the README's table (60 minutes on 2026-11-28; ddp's row is the longest).
LONG_STEPS = 1500
LONG_RUNS = ["ddp", "streaming-overlap-fp4-ef", "sparseloco-topk32-down16-h20-tau0"]

CHUNK = 256  # diloco.codec_chunk's default


def bits_per_value(codec):
    """Bits a value costs on the wire; for a sparse codec, per kept value (its position,
    its code and its share of the chunk's scale)."""
    dense = {"fp32": 32, "bf16": 16, "fp16": 16, "int8": 8 + 32 / CHUNK, "fp4": 4 + 32 / CHUNK}
    if codec in dense:
        return dense[codec]
    kept = max(1, CHUNK // int(codec[len("topk"):]))
    return 8 + 4 + 32 / kept


def summarize(name, mode, fragments, overlap, codec, workers, steps, lines, wall):
    done = [l for l in lines if l["type"] == "worker_done"]
    evals = sorted((l["step"], l["val_loss"]) for l in lines if l["type"] == "eval")
    rounds = [l for l in lines if l["type"] == "round"]
    step_lines = [l for l in lines if l["type"] == "step"]
    bytes_at = {}  # sent + received by each worker, at each reported step
    for l in step_lines:
        bytes_at.setdefault(l["step"], []).append(l["bytes_sent"] + l.get("bytes_received", 0))
    curve = [(s, v, sum(bytes_at.get(s, [0])) / max(1, len(bytes_at.get(s, [0])))) for s, v in evals]
    return {
        "name": name,
        "mode": mode,
        "fragments": fragments,
        "overlap": overlap,
        "codec": codec,
        "workers": workers,
        "steps": steps,
        "val_loss": evals[-1][1] if evals else None,
        "bytes_per_worker": sum(d["bytes_sent"] for d in done) / max(1, len(done)),  # = bytes_sent_per_worker
        "bytes_sent_per_worker": sum(d["bytes_sent"] for d in done) / max(1, len(done)),
        "bytes_received_per_worker": sum(d["bytes_received"] for d in done) / max(1, len(done)),
        "peak_round_bytes": max((r["bytes"] / max(1, r["participants"]) for r in rounds), default=0),
        "rounds": len(rounds),
        "wall_s": wall,
        "compute_utilisation": sum(d.get("compute_utilisation", 0) for d in done) / max(1, len(done)),
        "curve": curve,
    }


def markdown(results):
    """The summary table of results.json's rows (tools/bench/report.py quality DIR)."""
    base = next((r for r in results if r["mode"] == "ddp"), None)
    rows = ["| run | P | tau | codec | bits per (kept) value | held-out loss | vs ddp | sent / worker | "
            "received / worker | ddp sent+received / these | peak bytes in one round | wall s | compute utilisation |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]

    def both(r):
        return r["bytes_sent_per_worker"] + r["bytes_received_per_worker"]

    for r in results:
        vs = f"{(r['val_loss'] / base['val_loss'] - 1) * 100:+.1f}%" if base and r["val_loss"] else "-"
        ratio = f"{both(base) / both(r):.0f}x" if base and both(r) else "-"
        rows.append(f"| {r['name']} | {r['fragments']} | {r['overlap']} | {r['codec']} | "
                    f"{'/'.join(f'{bits_per_value(c):.1f}' for c in r['codec'].split('/'))} | "
                    f"{r['val_loss']:.3f} | {vs} | "
                    f"{r['bytes_sent_per_worker'] / 1e6:.1f} MB | {r['bytes_received_per_worker'] / 1e6:.1f} MB | "
                    f"{ratio} | {r['peak_round_bytes'] / 1e6:.2f} MB | "
                    f"{r['wall_s']:.0f} | {r['compute_utilisation']:.3f} |")
    return "\n".join(rows)


def write_table(results, out):
    text = markdown(results)
    with open(os.path.join(out, "table.md"), "w") as f:
        f.write(text + "\n")
    return text


def pyplot_or_none(tool, image):
    """matplotlib's pyplot without a display, or None (saying which image is skipped)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print(f"{tool}: matplotlib missing (apt-get install python3-matplotlib): no {image}", file=sys.stderr)
        return None


def write_plot(results, out, title):
    plt = pyplot_or_none("quality", "loss.png")
    if plt is None:
        return
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    colours = plt.get_cmap("tab20").colors  # more runs than the default cycle's 10 colours
    for i, r in enumerate(results):
        steps = [c[0] for c in r["curve"]]
        loss = [c[1] for c in r["curve"]]
        moved = [max(c[2], 1) for c in r["curve"]]
        style = {"marker": "os^"[i // 10 % 3], "color": colours[2 * i % 20 + i // 10 % 2], "label": r["name"]}
        a.plot(steps, loss, **style)
        b.plot(moved, loss, **style)
    a.set_xlabel("inner step")
    a.set_ylabel("held-out loss (nats/byte)")
    b.set_xlabel("bytes sent + received per worker")
    b.set_xscale("log")
    b.set_ylabel("held-out loss (nats/byte)")
    a.legend(fontsize=7)
    a.grid(alpha=0.3)
    b.grid(alpha=0.3)
    fig.suptitle(f"Atoll: quality against steps and bytes ({title})")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "loss.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", default="", help="default: OUT_ROOT/quality, or OUT_ROOT/quality-long for --profile long")
    ap.add_argument("--out-root", default="build/bench")
    ap.add_argument("--profile", choices=("quick", "long"), default="quick",
                    help=f"quick: every configuration at 600 steps; long: {', '.join(LONG_RUNS)} at {LONG_STEPS}")
    ap.add_argument("--steps", type=int, default=0, help="inner steps (0: the profile's)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--only", default="", help="comma-separated run names")
    ap.add_argument("--reuse", action="store_true", help="keep finished runs found in OUT/runs (resume a benchmark)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a setting added to every run, e.g. diloco.round_record=inputs (repeatable; use another "
                         "--out to keep both)")
    args = ap.parse_args()
    for setting in args.set:
        if "=" not in setting:
            ap.error(f"--set takes KEY=VALUE, not {setting!r}")
    if not args.steps:
        args.steps = LONG_STEPS if args.profile == "long" else 600
    if not args.out:
        args.out = os.path.join(args.out_root, "quality-long" if args.profile == "long" else "quality")
    only = set(filter(None, args.only.split(",")))
    if args.profile == "long" and not only:
        only = set(LONG_RUNS)
    unknown = only - {r[0] for r in RUNS}
    if unknown:
        sys.exit(f"quality: no configuration named {', '.join(sorted(unknown))} (see RUNS in {__file__})")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "quality")  # run.json: command, date, machine, revision
    results = []
    for name, extra, mode, fragments, overlap, codec in RUNS:
        if only and name not in only:
            continue
        run_dir = os.path.join(args.out, "runs", name)
        metrics_path = os.path.join(run_dir, "metrics.jsonl")
        if args.reuse and os.path.exists(metrics_path):
            lines = read_lines(metrics_path)
            summary = [l for l in lines if l["type"] == "summary"]
            if summary:
                r = summarize(name, mode, fragments, overlap, codec, args.workers, args.steps, lines, summary[-1]["wall_s"])
                r["profile"] = args.profile
                print(f"quality: {name}: reused, val_loss {r['val_loss']:.4f}", flush=True)
                results.append(r)
                continue
        subprocess.run(["rm", "-rf", run_dir], check=True)
        cmd = [args.atoll, "local", "--nodes", str(args.workers), "--steps", str(args.steps), "--run-dir", run_dir] + extra
        cmd += [arg for setting in args.set for arg in ("--set", setting)]
        print(f"quality: {name}: {' '.join(cmd)}", flush=True)
        started = time.time()
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        wall = time.time() - started
        if proc.returncode != 0:
            print(proc.stdout[-3000:], file=sys.stderr)
            sys.exit(f"quality: run {name} failed with status {proc.returncode}")
        r = summarize(name, mode, fragments, overlap, codec, args.workers, args.steps,
                      read_lines(os.path.join(run_dir, "metrics.jsonl")), wall)
        r["profile"] = args.profile
        print(f"quality: {name}: val_loss {r['val_loss']:.4f}, {r['bytes_sent_per_worker'] / 1e6:.1f} MB sent and "
              f"{r['bytes_received_per_worker'] / 1e6:.1f} MB received per worker, "
              f"{wall:.0f} s", flush=True)
        results.append(r)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=2)
    print(write_table(results, args.out))
    write_plot(results, args.out, f"{args.workers} workers, shakespeare, {args.steps} steps, {args.profile} profile")
    print(f"quality: wrote {args.out}/table.md, results.json, loss.png")


if __name__ == "__main__":
    main()
