#!/usr/bin/env python3
"""Bring your own model: the example TorchScript model trained by Atoll against the same
model trained by plain PyTorch in one process, same steps, measured side by side.

    ./tools/dev bench own-model [--steps 300] [--out DIR]

1. examples/torchscript/model.py's TinyGPT, scripted with seed 1 (both runs start from it);
2. Atoll: `atoll local --model` with 2 nodes x 1 worker, DiLoCo H = --sync-every, each worker
   --steps inner steps on its half of the training bytes; then `atoll export` and the held-out
   loss of the exported model, computed here;
3. PyTorch: one process, --steps steps on all the training bytes, the same inner optimizer
   (AdamW betas 0.9/0.95, weight decay 0.1, warm-up 50 then cosine to 0.1 x lr, clipping at 1,
   lr 3e-3, batch 32, context 64), as Atoll's training/inner_optimizer.cpp;
4. both evaluated on Atoll's held-out windows (the last 10%, 16 batches of 32).
Writes DIR/own_model.json.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from benchlib import provenance  # tools/bench/benchlib, next to this script

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "examples", "torchscript"))
import model as example_model  # noqa: E402
from atoll_data import held_out_windows  # noqa: E402

DATA = os.path.join(ROOT, "examples", "data", "tinyshakespeare.txt")
CONTEXT, BATCH, EVAL_BATCHES = 64, 32, 16
LR, MIN_LR_RATIO, WARMUP, WEIGHT_DECAY, CLIP = 3e-3, 0.1, 50, 0.1, 1.0


def held_out_loss(module, tokens):
    module.eval()
    with torch.no_grad():
        losses = [F.cross_entropy(module(x).reshape(-1, 256), y.reshape(-1)).item()
                  for x, y in held_out_windows(tokens, CONTEXT, BATCH, EVAL_BATCHES)]
    return sum(losses) / len(losses)


def learning_rate(step, steps):
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / max(1, steps - WARMUP))
    return LR * (MIN_LR_RATIO + (1 - MIN_LR_RATIO) * 0.5 * (1 + math.cos(math.pi * progress)))


def train_pytorch(model_file, tokens, steps, threads):
    torch.set_num_threads(threads)
    module = torch.jit.load(model_file)
    opt = torch.optim.AdamW(module.parameters(), lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=WEIGHT_DECAY)
    train = tokens[:len(tokens) * 9 // 10]
    gen = torch.Generator().manual_seed(1)
    start = time.time()
    for step in range(steps):
        module.train()
        starts = torch.randint(0, len(train) - CONTEXT - 1, (BATCH,), generator=gen)
        w = torch.stack([train[s:s + CONTEXT + 1] for s in starts.tolist()])
        loss = F.cross_entropy(module(w[:, :-1]).reshape(-1, 256), w[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP)
        for g in opt.param_groups:
            g["lr"] = learning_rate(step, steps)
        opt.step()
    return held_out_loss(module, tokens), time.time() - start


def markdown(result):
    """Atoll's and PyTorch's held-out loss, from own_model.json (tools/bench/report.py own-model DIR)."""
    a, t = result["atoll"], result["pytorch"]
    return "\n".join([
        f"| {result['steps']} steps | held-out loss | wall s |", "|---|---|---|",
        f"| Atoll, {a['workers']} workers, DiLoCo H = {result['sync_every']} | {a['val_loss']:.4f} | {a['wall_s']:.0f} |",
        f"| PyTorch, {t['workers']} process | {t['val_loss']:.4f} | {t['wall_s']:.0f} |"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", default=os.path.join(ROOT, "build", "tools", "atoll"))
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "bench", "own_model"))
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--sync-every", type=int, default=50)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "own-model")  # run.json: command, date, machine, revision
    model_file = os.path.join(args.out, "model.pt")
    torch.manual_seed(1)
    torch.jit.script(example_model.TinyGPT(context=CONTEXT)).save(model_file)
    with open(DATA, "rb") as fh:
        tokens = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8).long()

    run_dir = os.path.join(args.out, "run")
    subprocess.run(["rm", "-rf", run_dir], check=True)
    started = time.time()
    subprocess.run([args.atoll, "local", "--model", model_file, "--data", DATA, "--steps", str(args.steps),
                    "--sync-every", str(args.sync_every), "--run-dir", run_dir], check=True,
                   stdout=subprocess.DEVNULL)
    atoll_wall = time.time() - started
    trained = os.path.join(args.out, "trained.pt")
    subprocess.run([args.atoll, "export", "--run-dir", run_dir, "--out", trained, "--force"], check=True,
                   stdout=subprocess.DEVNULL)
    atoll_loss = held_out_loss(torch.jit.load(trained), tokens)

    torch_loss, torch_wall = train_pytorch(model_file, tokens, args.steps, threads=os.cpu_count() or 1)
    result = {
        "steps": args.steps, "sync_every": args.sync_every,
        "atoll": {"workers": 2, "val_loss": atoll_loss, "wall_s": atoll_wall},
        "pytorch": {"workers": 1, "val_loss": torch_loss, "wall_s": torch_wall},
    }
    with open(os.path.join(args.out, "own_model.json"), "w") as fh:
        json.dump(result, fh, indent=2)
    print(f"held-out loss after {args.steps} steps: Atoll (2 workers, DiLoCo H={args.sync_every}) {atoll_loss:.4f} "
          f"in {atoll_wall:.0f} s; PyTorch (1 process) {torch_loss:.4f} in {torch_wall:.0f} s")


if __name__ == "__main__":
    main()
