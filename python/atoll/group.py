"""A torch.distributed process group that trains one replica of an Atoll run: DDP (or any
loop that keeps the group's parameters equal) inside the group, DiLoCo across replicas.

The group's rank 0 is the Atoll node (its leader); the other ranks follow it over the
group's own backend (Gloo on CPUs, NCCL on GPUs). Only the leader syncs with the run, so
the group is one worker in membership, rounds, digests and `atollctl`, and its outer
traffic is one replica's, whatever the group's size.

    leader (group rank 0, the node)                 followers (every other rank)
    -------------------------------                 ----------------------------
    DiLoCo(): join, the first turn
      start   [status, rank, world, steps] ---->    the node's rank, world and steps
      tensors of every parameter group ------->    the run's state
    step(): the optimizer's step                    step(): the optimizer's step
      hand over, wait for the turn
      turn    [status, group mask] ------------>    go, done or failed
      tensors of the groups the runtime wrote ->   the merged fragments

status: 1 go on, 0 done (run.steps reached, or drained), -1 the leader's node failed. A
broadcast that fails (a process of the group died, or its backend timed out) raises
GroupLost on every rank that sees it; the leader then leaves the run, so a group that lost
a process never contributes again.
"""
import torch
import torch.distributed as dist

from .errors import GroupLost, typed

GO, DONE, FAILED = 1, 0, -1


class ReplicaGroup:
    """The group side of atoll.DiLoCo for `group`, a torch.distributed process group."""

    def __init__(self, group):
        if not dist.is_available() or not dist.is_initialized():
            raise typed("invalid_config", "group= needs torch.distributed initialised first "
                                          "(torch.distributed.init_process_group, e.g. under torchrun)")
        try:
            ranks = dist.get_process_group_ranks(group)
        except Exception:
            raise typed("invalid_config", f"group must be a torch.distributed process group, not {group!r}") from None
        if dist.get_rank() not in ranks:
            raise typed("invalid_config", f"this process (rank {dist.get_rank()}) is not in the group {ranks}")
        self.group = group
        self.leader = ranks[0]
        self.size = len(ranks)
        self.is_leader = dist.get_rank() == self.leader
        backend = dist.get_backend(group)
        self.device = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")

    def share_start(self, status=FAILED, rank=0, world=0, steps=0):
        """The leader's start, sent to the group; every rank returns it as (status, rank,
        world, steps). Followers pass nothing."""
        header = torch.tensor([status, rank, world, steps], dtype=torch.int64, device=self.device)
        self._broadcast(header, "the start")
        return tuple(int(v) for v in header.tolist())

    def share_turn(self, status=FAILED, written=(), group_count=0):
        """The leader's turn (its status and the parameter groups the runtime wrote), sent to
        the group; every rank returns (status, written group indices)."""
        turn = torch.zeros(1 + group_count, dtype=torch.int64, device=self.device)
        turn[0] = status
        for g in written:
            turn[1 + g] = 1
        self._broadcast(turn, "a turn")
        values = turn.tolist()
        return int(values[0]), [g for g in range(group_count) if values[1 + g]]

    @torch.no_grad()
    def share_tensors(self, tensors):
        """The leader's values of `tensors`, written into the followers' (one broadcast)."""
        if not tensors:
            return
        flat = torch.cat([t.detach().reshape(-1).to(self.device) for t in tensors])
        self._broadcast(flat, "the parameters")
        if not self.is_leader:
            offset = 0
            for t in tensors:
                t.copy_(flat[offset:offset + t.numel()].view_as(t))
                offset += t.numel()

    def _broadcast(self, tensor, what):
        try:
            dist.broadcast(tensor, src=self.leader, group=self.group)
        except RuntimeError as e:
            raise typed("group_lost", f"sharing {what} with the group's {self.size} processes failed "
                                      f"(a process died or the group timed out): {e}") from None


def unwrap_model(model):
    """The module whose parameters a replica syncs: DDP's wrapped module; FSDP is refused
    (each rank holds a shard, and Atoll syncs whole parameters from the group's rank 0)."""
    # By name: importing torch.distributed.fsdp fails on some PyTorch builds (1.13 on Python 3.11).
    if any(type(m).__name__ == "FullyShardedDataParallel" for m in model.modules()):
        raise typed("invalid_config", "FSDP models are not supported: a replica's group must hold whole parameters on "
                                      "every rank (DDP, or a loop that keeps them equal)")
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        return model.module
    return model


__all__ = ["ReplicaGroup", "unwrap_model", "GroupLost", "GO", "DONE", "FAILED"]
