#!/usr/bin/env python3
"""GPU benchmarks of the Atoll worker, each next to its baseline in the same run.

1. Inner step rate: the Atoll worker (`atoll local --nodes 1 --devices cuda:0`, no round in
   the window) against the same GPT in PyTorch eager on the same GPU: same architecture and
   initialisation, batch, bf16 autocast, fused AdamW, clipping and schedule; eager once
   with loss.item() every step, once reading each loss one step late as the worker does.
2. Time lost to sync: the worker's wall time with Streaming DiLoCo rounds (fp4 + error
   feedback; blocking, tau = 0, and overlapped, tau = 5) against the same steps without
   rounds.

Writes OUT/results.json and OUT/table.md. Run by `./tools/dev gpu-test bench`.
`--model 100m` trains the 100m preset's shape instead (14 blocks, width 768, context 256;
99.6M parameters), at tau = 5 with 4 and with 8 fragments: `--runs eager,none,tau5,tau5-f8`.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

CONFIG = "examples/configs/gpt-gpu.toml"
# The shapes: the GPU example's (the config file's) and the 100m preset's, the same
# batch. Each is (layers, width, heads, context).
MODELS = {"gpu": (12, 768, 12, 512), "100m": (14, 768, 12, 256)}
BATCH = 32
LR, WARMUP, MIN_LR_RATIO, WD, CLIP = 6e-4, 100, 0.1, 0.1, 1.0


def pytorch_eager(steps, warmup, lagged=False, shape=MODELS["gpu"], profile=None):
    """Median s/step. lagged: read each loss one step late, after the next step is queued
    (pinned copy and an event), as the Atoll worker does; else loss.item() every step.
    profile: (first, count, path): a torch.profiler Chrome trace of those steps."""
    import torch
    import torch.nn.functional as F
    from torch_gpt import GPT, lr_at

    layers, width, heads, context = shape
    torch.manual_seed(1)
    dev = torch.device("cuda:0")
    model = GPT(layers, width, heads, context).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), weight_decay=WD, fused=True)
    data = torch.frombuffer(bytearray(open("examples/data/tinyshakespeare.txt", "rb").read()), dtype=torch.uint8)
    train = data[: len(data) * 9 // 10].long()
    gen = torch.Generator().manual_seed(1)

    times = []
    slots = [(torch.empty((), pin_memory=True), torch.cuda.Event()) for _ in range(2)]
    profiler = None
    for step in range(steps):
        if profile and step == profile[0]:
            torch.cuda.synchronize()
            profiler = torch.profiler.profile(
                activities=[torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA])
            profiler.__enter__()
        start = time.perf_counter()
        idx = torch.randint(0, len(train) - context - 2, (BATCH,), generator=gen)
        w = torch.stack([train[i : i + context + 1] for i in idx.tolist()])
        x = w[:, :context].pin_memory().to(dev, non_blocking=True)
        y = w[:, 1:].pin_memory().to(dev, non_blocking=True)
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, LR, WARMUP, MIN_LR_RATIO)
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = F.cross_entropy(model(x).view(-1, 256), y.reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        if lagged:
            host, landed = slots[step % 2]
            host.copy_(loss.detach(), non_blocking=True)
            landed.record()
            before_host, before_landed = slots[(step - 1) % 2] if step > 0 else slots[0]
            before_landed.synchronize()
            before_host.item()
        else:
            loss.item()
        times.append(time.perf_counter() - start)
        if profiler and step + 1 == profile[0] + profile[1]:
            torch.cuda.synchronize()
            profiler.__exit__(None, None, None)
            profiler.export_chrome_trace(profile[2])
            profiler = None
    return statistics.median(times[warmup:])


def shape_sets(shape):
    layers, width, heads, context = shape
    return [f"model.layers={layers}", f"model.width={width}", f"model.heads={heads}", f"model.context={context}"]


def atoll_run(atoll, out, name, steps, sets, env=None):
    run_dir = os.path.join(out, name)
    subprocess.run(["rm", "-rf", run_dir], check=True)
    cmd = [atoll, "local", "--nodes", "1", "--devices", "cuda:0", "--config", CONFIG, "--steps", str(steps),
           "--run-dir", run_dir, "--set", "run.eval_every=1000000", "--set", "run.log_every=10"]
    for s in sets:
        cmd += ["--set", s]
    started = time.time()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        print(proc.stdout[-4000:], file=sys.stderr)
        raise SystemExit(f"gpu_step: {name} failed")
    records = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl")) if l.strip()]
    tokens = BATCH * int(next(v.split("=")[1] for v in sets if v.startswith("model.context=")))
    per_step = [tokens / r["tokens_per_s"] for r in records
                if r.get("type") == "step" and r.get("tokens_per_s", 0) > 0 and r["step"] > 20]
    done = [r for r in records if r.get("type") == "worker_done"]
    round_s = [r["duration_s"] for r in records if r.get("type") == "round" and "duration_s" in r]
    # Steady state: from the first progress report at step 20 to the first at the last
    # step, leaving out start-up (CUDA context, allocator, the first steps).
    at = {}
    for r in records:
        if r.get("type") == "step":
            at.setdefault(r["step"], r["time"])
    return {"s_per_step": statistics.median(per_step) if per_step else None,
            "wall_s": done[0]["wall_s"] if done else None,
            "wait_s": done[0].get("wait_s") if done else None,
            "compute_utilisation": done[0].get("compute_utilisation") if done else None,
            "steady_s": at[steps] - at[20] if 20 in at and steps in at else None,
            "rounds": len(round_s),
            # The coordinator's view of a round: first contribution to commit.
            "round_s_median": statistics.median(round_s) if round_s else None,
            "round_s_max": max(round_s) if round_s else None,
            "launcher_s": time.time() - started}


RUNS = {  # name: (results key, label, settings)
    "none": ("atoll", "Atoll, no rounds", ["diloco.sync_every=1000000", "diloco.overlap=0"]),
    "tau0": ("atoll_sync_tau0", "Atoll, rounds every 50, tau = 0", ["diloco.sync_every=50", "diloco.overlap=0"]),
    "tau5": ("atoll_sync_tau5", "Atoll, rounds every 50, tau = 5", ["diloco.sync_every=50", "diloco.overlap=5"]),
    # Twice the fragments: each round carries half the values, so its work fits the
    # overlap's steps sooner (a round starts every 50 / 8 steps).
    "tau5-f8": ("atoll_sync_tau5_f8", "Atoll, rounds every 50, tau = 5, 8 fragments",
                ["diloco.sync_every=50", "diloco.overlap=5", "diloco.fragments=8"]),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--model", choices=sorted(MODELS), default="gpu")
    ap.add_argument("--runs", default="", help="comma-separated from eager,none,tau0,tau5,tau5-f8 (default: "
                                                "eager,none,tau0,tau5; eager,none,tau5,tau5-f8 for --model 100m)")
    args = ap.parse_args()
    runs = args.runs.split(",") if args.runs else (["eager", "none", "tau5", "tau5-f8"] if args.model == "100m" else
                                                    ["eager", "none", "tau0", "tau5"])
    if "none" not in runs or "eager" not in runs:
        raise SystemExit("gpu_step: --runs needs eager and none (the baselines)")
    shape = MODELS[args.model]
    tokens = BATCH * shape[3]
    os.makedirs(args.out, exist_ok=True)
    results = {"model": args.model, "shape": shape}
    results["pytorch"] = {"s_per_step": pytorch_eager(args.steps, 20, shape=shape)}
    print("pytorch eager:", results["pytorch"], flush=True)
    results["pytorch_lagged"] = {"s_per_step": pytorch_eager(args.steps, 20, lagged=True, shape=shape)}
    print("pytorch eager, loss read one step late:", results["pytorch_lagged"], flush=True)
    for run in runs:
        if run == "eager":
            continue
        key, label, sets = RUNS[run]
        results[key] = atoll_run(args.atoll, args.out, f"{args.model}-{run}", args.steps, sets + shape_sets(shape))
        print(f"{label}:", results[key], flush=True)
    base = results["atoll"]
    eager = results["pytorch"]["s_per_step"]
    # Time lost to sync: against the run without rounds, over its wall time (start-up
    # included, as measured before) and over steps 20 to the last (steady state).
    lines = [f"Model {args.model} (layers, width, heads, context = {shape}), batch {BATCH}, {args.steps} steps", "",
             "| run | s/step (median) | tokens/s | vs PyTorch eager | wall s | steps 20-end s | rounds | lost / round"
             " | lost / wall | lost / steps 20-end | round s (median, max) | worker wait s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|",
             f"| PyTorch eager (fused AdamW, bf16) | {eager:.4f} | {tokens / eager:,.0f} | 1.00x | | | | | | | | |",
             f"| PyTorch eager, loss read one step late | {results['pytorch_lagged']['s_per_step']:.4f} | "
             f"{tokens / results['pytorch_lagged']['s_per_step']:,.0f} | "
             f"{eager / results['pytorch_lagged']['s_per_step']:.2f}x | | | | | | | | |"]
    for run in runs:
        if run == "eager":
            continue
        key, label, _ = RUNS[run]
        r = results[key]
        speed = eager / r["s_per_step"] if r["s_per_step"] else float("nan")
        rate = f"{tokens / r['s_per_step']:,.0f}" if r["s_per_step"] else ""
        lost = (r["wall_s"] - base["wall_s"]) if key != "atoll" and r["wall_s"] and base["wall_s"] else None
        per_round = f"{lost / r['rounds']:.3f} s" if lost is not None and r["rounds"] else ""
        frac = f"{lost / base['wall_s']:.1%}" if lost is not None else ""
        steady = ""
        if key != "atoll" and r["steady_s"] and base["steady_s"]:
            steady = f"{(r['steady_s'] - base['steady_s']) / base['steady_s']:.1%}"
        round_s = f"{r['round_s_median']:.3f}, {r['round_s_max']:.3f}" if r["round_s_median"] is not None else ""
        wait = f"{r['wait_s']:.2f}" if r["wait_s"] is not None else ""
        steady_s = f"{r['steady_s']:.2f}" if r["steady_s"] else ""
        lines.append(f"| {label} | {r['s_per_step']:.4f} | {rate} | {speed:.2f}x | {r['wall_s']:.1f} | {steady_s} |"
                     f" {r['rounds']} | {per_round} | {frac} | {steady} | {round_s} | {wait} |")
    table = "\n".join(lines)
    print(table)
    json.dump(results, open(os.path.join(args.out, "results.json"), "w"), indent=1)
    open(os.path.join(args.out, "table.md"), "w").write(table + "\n")


if __name__ == "__main__":
    main()
