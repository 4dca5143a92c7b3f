#!/usr/bin/env python3
"""A Python node that trains a TorchScript language model (examples/torchscript/model.py)
from its own loop, in a run where C++ nodes train the same file (`atoll join --model`):

    python3 examples/torchscript/model.py --out model.pt
    build/tools/atoll up --listen tcp://127.0.0.1:7070 --run-dir runs/mixed --set run.example=external \\
        --set run.data=examples/data/tinyshakespeare.txt --set run.min_workers=2
    PYTHONPATH=build/python /usr/bin/python3 examples/python/torchscript_lm.py --head tcp://127.0.0.1:7070 \\
        --model model.pt --data examples/data/tinyshakespeare.txt &
    build/tools/atoll join --head tcp://127.0.0.1:7070 --model model.pt

The loop follows Atoll's contract for the C++ nodes: int64 byte ids [B, T] in, logits
[B, T, V] out, next-token cross-entropy, T = model.context (64). Each node reads its own
shard of the windows. Prints one JSON line at the end: the held-out loss on the last tenth
of the file and the parameters' digest (the run's theta_global, as on every node).
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atoll  # noqa: E402  (PYTHONPATH=build/python)
from blobs import parameter_digest  # noqa: E402


def windows(tokens, context, rank, world):
    """Starts of the [context + 1]-token windows of shard `rank` of `world`."""
    starts = torch.arange(0, len(tokens) - context - 1, context)
    return starts[rank::world]


@torch.no_grad()
def held_out_loss(model, tokens, context, batches=8, batch=16):
    starts = torch.arange(0, len(tokens) - context - 1, context)[: batches * batch].view(batches, batch)
    losses = []
    for b in starts:
        x = torch.stack([tokens[s:s + context + 1] for s in b.tolist()])
        logits = model(x[:, :-1])
        losses.append(F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1)).item())
    return sum(losses) / len(losses)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="the head's address, tcp://HOST:PORT")
    ap.add_argument("--keys", default=None, help="the run's key folder (atoll keygen), for CURVE")
    ap.add_argument("--model", required=True, help="the TorchScript module (the same file as the C++ nodes')")
    ap.add_argument("--data", required=True, help="a text file, trained on as bytes")
    ap.add_argument("--context", type=int, default=64, help="T: the run's model.context")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-3)
    args = ap.parse_args()

    torch.set_num_threads(1)
    model = torch.jit.load(args.model)
    data = torch.frombuffer(bytearray(open(args.data, "rb").read()), dtype=torch.uint8).long()
    train, held_out = data[: len(data) * 9 // 10], data[len(data) * 9 // 10:]
    node = atoll.join(args.head, keys=args.keys)
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr)
    diloco = atoll.DiLoCo(node, model, inner)
    starts = windows(train, args.context, node.rank, node.world)
    batches = torch.Generator().manual_seed(100 + node.rank)
    print(f"node rank {node.rank} of {node.world}: {len(starts)} windows, {diloco.steps} steps", flush=True)
    while not diloco.done:
        picked = starts[torch.randint(0, len(starts), (args.batch,), generator=batches)]
        x = torch.stack([train[s:s + args.context + 1] for s in picked.tolist()])
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
        loss.backward()
        diloco.step(loss, samples=args.batch * args.context)
        inner.zero_grad()
    print(json.dumps({"rank": node.rank, "steps": diloco.steps_taken,
                      "held_out_loss": held_out_loss(model, held_out, args.context),
                      "digest": parameter_digest(model)}), flush=True)
    node.leave()


if __name__ == "__main__":
    try:
        main()
    except atoll.AtollError as e:
        print(f"torchscript_lm: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
