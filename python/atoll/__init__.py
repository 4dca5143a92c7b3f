"""Atoll from your own PyTorch loop.

    import torch, atoll

    node = atoll.join("tcp://head:7070", keys="keys/")   # this process becomes a node with one worker
    model = MyNet()
    inner = torch.optim.AdamW(model.parameters(), lr=3e-4)
    diloco = atoll.DiLoCo(node, model, inner)            # H, fragments, tau, codec: the head's config
    for x, y in my_loader(rank=node.rank, world=node.world):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        diloco.step(loss)      # the inner step; fragment syncs run in the runtime
        inner.zero_grad()
        if diloco.done:        # run.steps reached, or this node was drained
            break
    node.leave()

The head runs with `atoll up --set run.example=external`. The process is a real Atoll node
(the same C++ node agent and worker as `atoll join`): CURVE keys, heartbeats, leases,
fencing, state transfer, codecs with error feedback. The worker syncs the model's own
parameter tensors in place, at step boundaries: between `diloco.step()` calls the runtime
does not touch them.

Errors are raised as subclasses of AtollError named after Atoll's typed errors
(ModelMismatch, Timeout, InvalidConfig, ...); `error.code` is the name Atoll's logs use.
"""
import atexit
import contextlib
import warnings
import weakref

import torch

from . import _atoll, errors
from .errors import AtollError
from .errors import call as _call
from .errors import typed as _typed
from .group import DONE, FAILED, GO, ReplicaGroup, unwrap_model

# One exception class per typed error: ModelMismatch, Timeout, InvalidConfig, NotReady, ...
for _name in errors.CLASS_NAMES:
    globals()[_name] = getattr(errors, _name)
__all__ = ["join", "Node", "DiLoCo", "ElasticSampler", "AtollError", "parameter_groups"] + errors.CLASS_NAMES


# Nodes that joined and have not left: an interpreter that exits takes them with it (the
# node's threads would otherwise outlive the objects that own them).
_live_nodes = weakref.WeakSet()


@atexit.register
def _leave_all():
    for node in list(_live_nodes):
        node._handle.leave()


class Node:
    """This process as a node of an Atoll run; made by join(). It joins the run when a
    DiLoCo is made with it (the head checks the model then). With a process group, only
    the group's rank 0 is a node; the others follow it (atoll/group.py)."""

    def __init__(self, head, keys=None, insecure=False, run_dir="", wait_for_head=300, listen="", no_listen=False,
                 group=None):
        if not isinstance(head, str) or not head.startswith("tcp://"):
            raise InvalidConfig(f"invalid_config: the head's address must be tcp://HOST:PORT, not {head!r}")
        if not isinstance(wait_for_head, int) or wait_for_head < 0:
            raise InvalidConfig("invalid_config: wait_for_head is whole seconds, 0 for ever")
        self._options = dict(head=head, keys=keys or "", insecure=bool(insecure), run_dir=run_dir or "",
                             wait_for_head=wait_for_head, listen=listen or "", no_listen=bool(no_listen))
        self._group = None if group is None else ReplicaGroup(group)
        self._handle = None
        self._from_leader = None  # a follower's (rank, world, steps), from its group's leader
        self._sampler = None  # an ElasticSampler made on this node: the run's data is its dataset

    @property
    def leads(self):
        """Whether this process syncs with the run: always, unless it follows its group's rank 0."""
        return self._group is None or self._group.is_leader

    def _start(self, groups, timeout):
        if self._handle is not None:
            raise InvalidConfig("invalid_config: this node already trains a model (one DiLoCo per node)")
        data = {}
        if self._sampler is not None:
            data = dict(data_units=self._sampler.dataset_len, batch_size=self._sampler.batch_size)
        self._handle = _call(_atoll.Node, groups=groups, **self._options, **data)
        _live_nodes.add(self)
        _call(self._handle.wait_started, timeout)

    def _joined(self):
        if self._handle is None and self._from_leader is None:
            raise NotReady("not_ready: the node joins the run when atoll.DiLoCo(node, model, optimizer) is made")
        return self._handle

    @property
    def rank(self):
        """This worker's data shard, 0 .. world - 1 (a group's shard: split it by the group's rank)."""
        handle = self._joined()
        return handle.rank if handle else self._from_leader[0]

    @property
    def world(self):
        """Number of data shards of the run (its workers when it started)."""
        handle = self._joined()
        return handle.world if handle else self._from_leader[1]

    def failure(self):
        """Why the node gave up, as an AtollError, or None."""
        if self._handle is None:
            return None
        f = self._handle.failure()
        return _typed(*f) if f else None

    def leave(self):
        """Stops the node: its worker stops, the head sees it leave. Raises the node's failure, if any."""
        if self._handle is None:
            return
        self._handle.leave()
        _live_nodes.discard(self)
        failure = self.failure()
        if failure is not None:
            raise failure


class ElasticSampler:
    """The batches of a dataset, as the run's data cursor hands them to this node: give it
    to a DataLoader as its batch_sampler, made before atoll.DiLoCo as loaders usually are.

        sampler = atoll.ElasticSampler(node, len(dataset), batch_size=32)
        loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)  # num_workers=0
        diloco = atoll.DiLoCo(node, model, inner)
        for x, y in loader:
            ...
            diloco.step(loss, samples=len(x))

    Every node of the run leases chunks of the dataset's indices from the head (shuffled per
    epoch by run.seed); each iteration yields one step's batch_size indices, and each
    diloco.step() trains exactly that batch. Each index is learned once an epoch by the
    committed model, through joins, leaves, deaths and head restarts; `atollctl data` shows
    the progress and `atoll export --ledger` what each round learned (README, "Your own
    PyTorch loop"). Iteration ends when the run has no steps left for this node (or, with
    run.data_epochs, no data). One batch per step: a loader that asks for the next batch
    before the step (num_workers > 0 prefetches) gets InvalidConfig instead of waiting for
    ever. Not with a process group (group=) yet."""

    def __init__(self, node, dataset_len, batch_size):
        if not isinstance(node, Node):
            raise InvalidConfig("invalid_config: node must come from atoll.join()")
        for name, value in (("dataset_len", dataset_len), ("batch_size", batch_size)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidConfig(f"invalid_config: {name} must be a positive int, not {value!r}")
        if node._group is not None:
            raise InvalidConfig("invalid_config: ElasticSampler does not take a process group yet (group=)")
        if node._handle is not None:
            raise InvalidConfig("invalid_config: make the ElasticSampler before atoll.DiLoCo: the node's worker "
                                "already started without it")
        if node._sampler is not None:
            raise InvalidConfig("invalid_config: this node has an ElasticSampler already (one dataset per run)")
        self.dataset_len, self.batch_size, self._node = dataset_len, batch_size, node
        node._sampler = self

    def __iter__(self):
        if self._node._handle is None:
            raise NotReady("not_ready: the sampler's batches come from the run once atoll.DiLoCo(node, ...) is made")
        while True:
            units = _call(self._node._handle.take_units)
            if units is None:
                return
            yield list(units)


def join(head, keys=None, insecure=False, run_dir="", wait_for_head=300, listen="", no_listen=False, group=None):
    """This process as a node of the run whose head listens at `head` (tcp://HOST:PORT).

    keys: the run's key folder (`atoll keygen`) for CURVE; insecure: plain TCP to a
    non-loopback head. run_dir: where this node may keep a keeper replica. wait_for_head:
    seconds to wait for a head that is not up yet (0: for ever). listen / no_listen: where
    peers send this node tensors, as `atoll join --listen / --no-listen`.

    group: a torch.distributed process group (e.g. torch.distributed.group.WORLD under
    torchrun) whose processes train one replica together, with DDP: every rank calls join
    and DiLoCo alike; the group's rank 0 is the node, and the others receive the merged
    fragments from it. A process of the group that fails takes the replica out of the run
    (GroupLost). FSDP is refused.
    """
    return Node(head, keys, insecure, run_dir, wait_for_head, listen, no_listen, group)


def _is_container(module):
    """nn.ModuleList and nn.Sequential, scripted or not: a model's blocks usually sit in one,
    and each block makes a group of its own."""
    if isinstance(module, torch.jit.ScriptModule):
        qualified = module._c._type().qualified_name()
        return "torch.nn.modules.container" in qualified and module.original_name in ("ModuleList", "Sequential")
    return isinstance(module, (torch.nn.ModuleList, torch.nn.Sequential))


def parameter_groups(model):
    """The model's parameters in groups, as Atoll makes fragments of whole groups: the
    module's own parameters first (if any), then each top-level child's, in order; a
    top-level nn.ModuleList or nn.Sequential counts child by child. A parameter shared by
    two children (tied weights) belongs to the first. The same groups as a C++ node makes
    of the module in TorchScript (`atoll join --model`). Returns a list of lists of (name,
    parameter)."""
    taken, groups = set(), []

    def add(prefix, named):
        group = []
        for name, p in named:
            if (p.data_ptr(), tuple(p.shape)) not in taken:
                taken.add((p.data_ptr(), tuple(p.shape)))
                group.append((prefix + name, p))
        if group:
            groups.append(group)

    add("", model.named_parameters(recurse=False))
    for child_name, child in model.named_children():
        if not _is_container(child):
            add(f"{child_name}.", child.named_parameters())
            continue
        add(f"{child_name}.", child.named_parameters(recurse=False))
        for item_name, item in child.named_children():
            add(f"{child_name}.{item_name}.", item.named_parameters())
    return groups


class DiLoCo:
    """DiLoCo / Streaming DiLoCo around the user's optimizer: step() takes the inner step,
    and the runtime syncs fragments (H, fragments, tau, codec: the head's config).

    groups: parameter groups to make fragments from (a list of lists of (name, parameter));
    default parameter_groups(model). Make it after moving the model to its device: the
    runtime holds the parameters' storage.
    """

    def __init__(self, node, model, optimizer, groups=None, timeout=600.0):
        if not isinstance(node, Node):
            raise InvalidConfig("invalid_config: node must come from atoll.join()")
        model = unwrap_model(model)
        self.model, self.optimizer, self._node, self._group = model, optimizer, node, node._group
        groups = parameter_groups(model) if groups is None else groups
        refs = []
        for group in groups:
            refs.append([_atoll.TensorRef(data=p.data_ptr(), shape=list(p.shape), dtype=str(p.dtype).split(".")[-1],
                                          device=str(p.device), name=name) for name, p in group])
        if not refs or not any(refs):
            raise InvalidConfig("invalid_config: the model has no parameters")
        self._tensors = [[p for _, p in group] for group in groups]
        self._handle = None
        self._steps_taken = 0
        if node.leads:
            self._start_node(refs, timeout)
        else:
            self._follow_start()
        self.done = not self._go
        if self.done:
            warnings.warn("atoll: the run has no steps left for this node (it had finished when the node joined); "
                          "the model is not the run's", RuntimeWarning, stacklevel=2)

    def _start_node(self, refs, timeout):
        """Joins the run; the worker waits for the first step, with the run's initial state
        in the parameters. A group's leader then hands that state to its group."""
        try:
            self._node._start(refs, timeout)
            self._handle = self._node._handle
            self._go = self._handle.wait_turn()
            self._raise_failure()
        except AtollError:
            if self._group is not None:
                self._group.share_start(FAILED)  # the followers raise too, instead of waiting
            raise
        if self._group is not None:
            h = self._handle
            with self._leaving_if_the_group_is_lost():
                self._group.share_start(GO if self._go else DONE, h.rank, h.world, h.steps)
                self._group.share_tensors([t for group in self._tensors for t in group])
            self._handle.take_written_groups()  # the followers have them all

    def _follow_start(self):
        status, rank, world, steps = self._group.share_start()
        if status == FAILED:
            raise errors.GroupLost("group_lost: the group's leader could not join the run (its error says why)")
        self._node._from_leader = (rank, world, steps)
        self._group.share_tensors([t for group in self._tensors for t in group])
        self._go = status == GO

    @property
    def steps(self):
        """The run's run.steps."""
        return self._handle.steps if self._handle else self._node._from_leader[2]

    @property
    def steps_taken(self):
        return self._steps_taken

    def step(self, loss=None, samples=0, held_out_loss=None):
        """The inner step (the optimizer's), then the runtime's turn at this step boundary:
        a fragment may be sent or merged into the parameters. Sets `done` when the run has
        no more steps for this node. loss (a float or a tensor) and samples are reported to
        the head as progress; held_out_loss, when given, as a held-out evaluation (what
        `atollctl`, the dashboard and /metrics show as the run's held-out loss). samples
        also weighs this node's contributions (diloco.weighting = samples, the default: the
        samples trained since its last sync of the fragment; a step without samples counts
        one, so give them in every node of a run, or set diloco.weighting = uniform)."""
        if self.done:
            return
        if not self._go:
            self.done = True
            self._raise_failure()
            return
        self.optimizer.step()
        self._steps_taken += 1
        if self._node.leads:
            value = float("nan") if loss is None else float(loss.detach() if hasattr(loss, "detach") else loss)
            held_out = None if held_out_loss is None else float(held_out_loss)
            self._handle.hand_over(value, int(samples), held_out)
            self._go = self._handle.wait_turn()
            if self._group is not None:
                self._lead_turn()
        else:
            self._follow_turn()
        if not self._go:
            self.done = True
            self._raise_failure()

    def _lead_turn(self):
        """Sends the group this turn's outcome and the parameter groups the runtime wrote."""
        status = GO if self._go else (FAILED if self._node.failure() else DONE)
        written = self._handle.take_written_groups()
        with self._leaving_if_the_group_is_lost():
            self._group.share_turn(status, written, len(self._tensors))
            self._group.share_tensors([t for g in written for t in self._tensors[g]])

    def _follow_turn(self):
        status, written = self._group.share_turn(group_count=len(self._tensors))
        self._group.share_tensors([t for g in written for t in self._tensors[g]])
        if status == FAILED:
            self.done = True
            raise errors.GroupLost("group_lost: the group's leader left the run (its error says why)")
        self._go = status == GO

    @contextlib.contextmanager
    def _leaving_if_the_group_is_lost(self):
        """A leader whose group lost a process leaves the run at once: the rest of a group
        never contributes as the replica."""
        try:
            yield
        except errors.GroupLost:
            self.done = True
            self._handle.leave()
            raise

    def _raise_failure(self):
        failure = self._node.failure()
        if failure is not None:
            raise failure
