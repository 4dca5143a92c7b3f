#!/usr/bin/env python3
"""classifier.py without Atoll, for comparison: the same model, data, optimizer and loop.

By default one process trains on the whole training set for --steps steps. With
--replicas K it is DiLoCo done by hand in one process: K copies of the model, each on its
shard of the data as K Atoll nodes would be (shard k of K, its own AdamW and batch seed),
and every --sync-every steps the outer step on their average change (SGD with
--outer-lr and Nesterov --outer-momentum, as Atoll's diloco.outer_lr and
diloco.outer_momentum; lr 1 and momentum 0 is plain averaging).

    /usr/bin/python3 examples/python/classifier_plain.py --steps 1000
    /usr/bin/python3 examples/python/classifier_plain.py --steps 600 --replicas 2 --sync-every 50 --outer-lr 1 --outer-momentum 0
"""
import argparse
import copy
import json
import os
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from blobs import Classifier, add_loop_arguments, held_out_loss, make_data, parameter_digest  # noqa: E402


class Replica:
    """One copy of the model on shard `rank` of `world`, as classifier.py's node would train it."""

    def __init__(self, model, data, rank, world, lr):
        self.model = model
        self.optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
        x, y = data
        self.x, self.y = x[rank::world], y[rank::world]
        self.batches = torch.Generator().manual_seed(100 + rank)

    def step(self, batch):
        idx = torch.randint(0, len(self.x), (batch,), generator=self.batches)
        loss = F.cross_entropy(self.model(self.x[idx]), self.y[idx])
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        return loss.item()


@torch.no_grad()
def outer_step(global_model, replicas, lr, momentum, velocity):
    """theta_global -= lr * Nesterov(mean(theta_global - theta_k)); every replica restarts from it."""
    for i, g in enumerate(global_model.parameters()):
        delta = torch.stack([g - list(r.model.parameters())[i] for r in replicas]).mean(0)
        velocity[i].mul_(momentum).add_(delta)
        g.sub_(lr * (delta + momentum * velocity[i]) if momentum else lr * delta)
    for r in replicas:
        for p, g in zip(r.model.parameters(), global_model.parameters()):
            p.copy_(g)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=1000, help="steps of each replica")
    ap.add_argument("--replicas", type=int, default=0, help="DiLoCo by hand with this many replicas (0: no DiLoCo)")
    ap.add_argument("--sync-every", type=int, default=50, help="H: inner steps between outer steps")
    ap.add_argument("--outer-lr", type=float, default=0.7)
    ap.add_argument("--outer-momentum", type=float, default=0.9)
    add_loop_arguments(ap)
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = Classifier()
    data, held_out = make_data()
    world = max(args.replicas, 1)
    replicas = [Replica(model if world == 1 else copy.deepcopy(model), data, k, world, args.lr) for k in range(world)]
    velocity = [torch.zeros_like(p) for p in model.parameters()]
    for step in range(1, args.steps + 1):
        losses = [r.step(args.batch) for r in replicas]
        if args.replicas and step % args.sync_every == 0:
            outer_step(model, replicas, args.outer_lr, args.outer_momentum, velocity)
        if step % args.log_every == 0:
            print(f"step {step}: loss {sum(losses) / len(losses):.4f}", flush=True)
    if args.replicas and args.steps % args.sync_every:
        outer_step(model, replicas, args.outer_lr, args.outer_momentum, velocity)  # end on theta_global
    loss, accuracy = held_out_loss(model, held_out)
    print(json.dumps({"steps": args.steps, "replicas": args.replicas, "held_out_loss": loss, "accuracy": accuracy,
                      "digest": parameter_digest(model)}), flush=True)


if __name__ == "__main__":
    main()
