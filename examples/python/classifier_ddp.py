#!/usr/bin/env python3
"""classifier.py with each replica trained by a group of processes: DDP over Gloo inside
the group, DiLoCo across groups. Start one group per replica, with torchrun or as here
(--processes N starts N processes of this script with RANK, WORLD_SIZE, MASTER_ADDR and
MASTER_PORT set, as torchrun would; Debian 12's torchrun fails under Python 3.11):

    examples/python/classifier_ddp.py --processes 2 --master-port 29400 --head tcp://127.0.0.1:7070

The group's rank 0 is the Atoll node (one worker of the run); the other ranks receive the
merged fragments from it. Every rank prints one JSON line at the end: all hold the run's
parameters, bit for bit. A process of the group that dies takes the replica out of the
run (the others raise atoll.GroupLost).
"""
import argparse
import json
import os
import subprocess
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import atoll  # noqa: E402  (PYTHONPATH=build/python)
from blobs import Classifier, add_loop_arguments, held_out_loss, make_data, parameter_digest  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--head", required=True, help="the head's address, tcp://HOST:PORT")
    ap.add_argument("--keys", default=None, help="the run's key folder (atoll keygen), for CURVE")
    ap.add_argument("--processes", type=int, default=0, help="start a group of this many processes, one per rank")
    ap.add_argument("--master-port", type=int, default=29400, help="the group's rendezvous port (--processes)")
    add_loop_arguments(ap)
    args = ap.parse_args()
    if args.processes and "RANK" not in os.environ:
        sys.exit(start_group(args.processes, args.master_port))

    dist.init_process_group("gloo")  # RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: from torchrun
    rank, size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    node = atoll.join(args.head, keys=args.keys, group=dist.group.WORLD)
    model = DistributedDataParallel(Classifier())
    inner = torch.optim.AdamW(model.parameters(), lr=args.lr)
    diloco = atoll.DiLoCo(node, model, inner)  # every rank; rank 0 joins the run
    (x, y), held_out = make_data()
    x, y = x[node.rank :: node.world], y[node.rank :: node.world]  # this replica's shard ...
    x, y = x[rank::size], y[rank::size]  # ... and this process's part of it
    batches = torch.Generator().manual_seed(100 + node.rank * size + rank)
    print(f"replica {node.rank} of {node.world}, process {rank} of {size}: {len(x)} examples", flush=True)

    step = 0
    while not diloco.done:
        idx = torch.randint(0, len(x), (args.batch,), generator=batches)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()  # DDP averages the gradients over the group
        diloco.step(loss, samples=args.batch * size)
        inner.zero_grad()
        step += 1
        if rank == 0 and step % args.log_every == 0:
            print(f"step {step}: loss {loss.item():.4f}", flush=True)

    loss, accuracy = held_out_loss(model.module, held_out)
    print(json.dumps({"replica": node.rank, "process": rank, "steps": step, "held_out_loss": loss,
                      "accuracy": accuracy, "digest": parameter_digest(model.module)}), flush=True)
    node.leave()
    dist.destroy_process_group()


def start_group(processes, port):
    """This script once per rank, as torchrun would start it; the worst exit code."""
    ranks = []
    for rank in range(processes):
        env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(processes),
                   MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable] + sys.argv, env=env))
    return max(abs(p.wait()) for p in ranks)


if __name__ == "__main__":
    try:
        main()
    except atoll.AtollError as e:
        print(f"classifier_ddp: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
