#!/usr/bin/env python3
"""Train the example classifier from a plain PyTorch loop across Atoll nodes.

    build/tools/atoll up --listen tcp://127.0.0.1:7070 --run-dir runs/py-head \\
        --set run.example=external --set run.steps=600 --set diloco.fragments=3 \\
        --set diloco.outer_lr=1 --set diloco.outer_momentum=0
    PYTHONPATH=build/python /usr/bin/python3 examples/python/classifier.py --head tcp://127.0.0.1:7070 &
    PYTHONPATH=build/python /usr/bin/python3 examples/python/classifier.py --head tcp://127.0.0.1:7070

Each process is a node with one worker. The loop is ordinary PyTorch; atoll.DiLoCo takes
the optimizer's step and syncs fragments of the model with the other nodes (every
diloco.sync_every steps, overlapped by diloco.overlap steps, with the head's codec). At the
end every node holds the same parameters and prints one JSON line with its held-out loss.
classifier_plain.py is the same loop without Atoll.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atoll  # noqa: E402  (PYTHONPATH=build/python)
from blobs import Classifier, add_loop_arguments, held_out_loss, make_data, parameter_digest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="the head's address, tcp://HOST:PORT")
    ap.add_argument("--keys", default=None, help="the run's key folder (atoll keygen), for CURVE")
    add_loop_arguments(ap)
    ap.add_argument("--eval-every", type=int, default=200, help="steps between held-out losses (rank 0)")
    ap.add_argument("--device", default="cpu", help="where the model trains, e.g. cuda:0")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    node = atoll.join(args.head, keys=args.keys)
    model = Classifier().to(args.device)
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr)
    diloco = atoll.DiLoCo(node, model, inner)  # joins the run; the first node's parameters start it
    (x, y), (hx, hy) = make_data()
    held_out = hx.to(args.device), hy.to(args.device)
    x, y = x[node.rank :: node.world].to(args.device), y[node.rank :: node.world].to(args.device)  # this node's shard
    batches = torch.Generator().manual_seed(100 + node.rank)
    print(f"node rank {node.rank} of {node.world}: {len(x)} examples, {diloco.steps} steps", flush=True)

    step = 0
    while not diloco.done:
        idx = torch.randint(0, len(x), (args.batch,), generator=batches).to(args.device)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        # Rank 0 measures the held-out loss now and then; the head shows it (atollctl status).
        held = held_out_loss(model, held_out)[0] if node.rank == 0 and step % args.eval_every == 0 else None
        diloco.step(loss, samples=args.batch, held_out_loss=held)
        inner.zero_grad()
        step += 1
        if step % args.log_every == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    loss, accuracy = held_out_loss(model, held_out)
    print(json.dumps({"rank": node.rank, "steps": step, "held_out_loss": loss, "accuracy": accuracy,
                      "digest": parameter_digest(model)}), flush=True)
    node.leave()


if __name__ == "__main__":
    try:
        main()
    except atoll.AtollError as e:
        print(f"classifier: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
