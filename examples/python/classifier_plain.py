#!/usr/bin/env python3
"""classifier.py without Atoll: the same model, data, optimizer and loop on one process
(the whole training set, the same number of steps), for comparison.

    /usr/bin/python3 examples/python/classifier_plain.py --steps 1000
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blobs import Classifier, add_loop_arguments, held_out_loss, make_data, parameter_digest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000)
    add_loop_arguments(ap)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr)
    (x, y), held_out = make_data()
    batches = torch.Generator().manual_seed(100)
    for step in range(1, args.steps + 1):
        idx = torch.randint(0, len(x), (args.batch,), generator=batches)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        inner.step()
        inner.zero_grad()
        if step % args.log_every == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)
    loss, accuracy = held_out_loss(model, held_out)
    print(json.dumps({"steps": args.steps, "held_out_loss": loss, "accuracy": accuracy,
                      "digest": parameter_digest(model)}), flush=True)


if __name__ == "__main__":
    main()
