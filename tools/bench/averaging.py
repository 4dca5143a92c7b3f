#!/usr/bin/env python3
"""Averaging throughput of one fragment: Atoll's real path against Gloo and raw TCP.

For each fragment size (MiB of fp32), worker count M and codec, runs `atoll local` with M
nodes training the mlp example sized so that its single fragment has that many bytes,
syncing every 2 steps. Each round then goes through the real path: M worker processes
send their contributions over ZeroMQ to the coordinator on one node, which decodes,
averages, applies the outer step, commits the round's record to both keepers (with
storage.keepers = nodes, the default, two replicas on two of the nodes; `--keepers head`:
the head's and one replica on a node. Each appends the round's record to its round log:
by default the encoded change every worker receives (diloco.round_record = result; `--records
inputs`: the encoded contributions or their fp32 average, whichever is smaller);
storage.sync = replicated, the default, acknowledges from the write-ahead log, fsync after
an fdatasync) and sends every worker its result.

    time = the last worker starts sending its contribution -> the last worker has applied
           the result (each worker's RoundAck says how long after its send it merged; the
           head stamps the acks, so both ends are on the head's clock: Gloo's timing
           includes its transfers, and so does this)
    throughput = fragment fp32 bytes / time        (median over rounds W+1..R)

W (`--warmup-rounds`, default 1) rounds are not measured: the first includes start-up, and
the next few fault in the processes' heaps, which grow for about ten rounds at 64 MiB
before a round's buffers are all reused (each fresh page is a fault; Gloo's baseline
reuses one tensor after one warm-up all-reduce). `--rounds 20 --warmup-rounds 10`
measures the steady state a long run sees.

Beside it, in the same run: Gloo's all-reduce of the same bytes across M processes
(torch.distributed from python3-torch, loopback TCP), the raw TCP bound: one socket
pair on loopback moving the same bytes between two processes, and the commit's disk bound:
two processes (the two keepers) each writing twice the fragment over a spare file of that
size under DIR (as keepers do) and fdatasyncing it, at once. `--bounds-only` prints the
bounds alone, the disk bound also for new files. Gloo keeps nothing; an Atoll round is durable before it is
released, so it can be no faster than the disk bound.

Atoll runs twice per row: over CURVE (every cluster's default) and over plain TCP
(`atoll local --plain-links`), since Gloo's TCP transport encrypts nothing. With
`--early-results on,off` also with and without diloco.early_results (results sent while
the round commits, applied on a confirmation once it is durable; on by default). `--sync
replicated,fsync` runs each row in both durability modes (default: replicated), and
`--keepers nodes,head` with both placements of the keepers (default: nodes).

Shaped links (`--mbit R`, needs root): the head and each node in a network namespace of its
own, each node's link shaped to R Mbit/s both ways with tc tbf (tools/bench/benchlib/netns.py, as
`bench links`), started with `atoll up` and `atoll join` instead of `atoll local`. Each row
then also has bytes_per_node: bytes sent + received per round through the busiest node's
link (the star's centre; bytes_per_node_mean averages the nodes), from the kernel's counters
over the whole run divided by its rounds (start-up and heartbeats are a few kB), the
keepers' records included. Beside it, the physical baseline: ring_bound_s, a ring
all-reduce's time, 2(M-1)/M of the encoded fragment through each link each way at R Mbit/s
(unshaped rows: at the TCP bound), and allreduce_bytes_per_node, its bytes sent + received
per node. Encoded sizes are the codecs' nominal ones (int8: a byte a value and an fp32
scale per 256 values); topk rows have none.

Writes DIR/results.json: [{size_mb, workers, codec, links, early_results, sync, keepers, atoll_gbps, gloo_gbps, tcp_bound_gbps,
commit_disk_bound_gbps, atoll_round_s, atoll_send_s (the last send starts -> the coordinator
has every contribution), atoll_release_s (-> the round is released, from the RoundReport),
atoll_coordinator_share, atoll_average_s, atoll_commit_s, atoll_keeper_write_s, atoll_results_s,
commit_bytes_per_keeper, keeper_bytes_per_node (the busiest node's record bytes over its link a
round: to keepers on other nodes, and to its keepers from elsewhere), cpu_s_per_round (every Atoll
process's CPU seconds a measured round, from /proc; the inner steps between rounds included),
cpu_s_per_round_net (loopback rows with --rounds 10 or more: the run's whole CPU less that of the
same run without rounds, over its rounds: what the rounds alone cost, warm-up rounds included), gloo_cpu_s (every rank's
CPU seconds an all-reduce), round_record, rounds_measured, warmup_rounds, shards, mbit, round_s (= atoll_round_s),
ring_bound_s, allreduce_bytes_per_node, bytes_per_node, bytes_per_node_mean}]
and prints a table. GB/s = 1e9 bytes per second. Where a round's time goes, medians over
rounds W+1..R: atoll_average_s (last contribution in -> the commit starts: decode, average,
outer step, encode the result), atoll_commit_s (the commit starts -> the slower keeper's
acknowledgement: copy and digest of theta and momentum, transfer, write, fdatasync; both
from the coordinator's debug log; atoll_keeper_write_s is the slower keeper's write and
fdatasync within it, from the keepers' debug logs) and atoll_results_s (release -> the last
worker's acknowledgement: results to the workers, applied and checked; with early results
only the confirmation travels then).
"""
import argparse
import json
import multiprocessing as mp
import os
import queue
import re
import shutil
import socket
import statistics
import subprocess
import sys
import time

from benchlib import netns, procstat, provenance  # tools/bench/benchlib, next to this script
from benchlib.cluster import free_port

MIB = 1 << 20

# ---- raw TCP bound ------------------------------------------------------------------


def _tcp_sink(port, total, ready):
    with socket.socket() as srv:
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        srv.bind(("127.0.0.1", port))
        srv.listen(1)
        ready.set()
        conn, _ = srv.accept()
        buf = bytearray(8 * MIB)
        view = memoryview(buf)
        got = 0
        while got < total:
            n = conn.recv_into(view)
            if n == 0:
                break
            got += n
        conn.sendall(b"k")
        conn.close()


def tcp_bound_gbps(size_bytes, repeats=3):
    best = 0.0
    payload = memoryview(bytearray(size_bytes))
    for _ in range(repeats):
        port = free_port()
        ready = mp.Event()
        sink = mp.Process(target=_tcp_sink, args=(port, size_bytes, ready))
        sink.start()
        ready.wait(10)
        with socket.create_connection(("127.0.0.1", port)) as c:
            start = time.perf_counter()
            c.sendall(payload)
            c.recv(1)
            elapsed = time.perf_counter() - start
        sink.join()
        best = max(best, size_bytes / elapsed / 1e9)
    return best


# ---- durable-write bound ----------------------------------------------------------------


def _write_synced(path, payload, flags):
    fd = os.open(path, flags, 0o600)
    try:
        written = 0
        while written < len(payload):
            written += os.write(fd, payload[written:written + 64 * MIB])
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _durable_writer(path, size_bytes, overwrite, ready, start, out):
    payload = memoryview(bytearray(size_bytes))
    if overwrite:  # the spare a keeper overwrites: a file of the record's size, already on disk
        _write_synced(path, payload, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    ready.put(True)
    start.wait()
    began = time.perf_counter()
    _write_synced(path, payload, os.O_WRONLY if overwrite else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    out.put(time.perf_counter() - began)


def commit_disk_bound_gbps(size_bytes, directory, overwrite=True, keepers=2, repeats=3):
    """What the commit alone costs on this machine's disk: each of the keepers writes the
    round's theta and momentum (2 x the fragment) and fdatasyncs it, all at once, as Atoll's
    keepers do (here they share one disk): over a spare file of that size (overwrite, what
    a keeper does from its second pruned round on), or to a new file. Fragment bytes / the
    slowest writer's time, best of `repeats`: no Atoll round can be faster than this."""
    best = 0.0
    for attempt in range(repeats):
        ready, start, out = mp.Queue(), mp.Event(), mp.Queue()
        paths = [os.path.join(directory, f"disk-bound-{attempt}-{k}.tmp") for k in range(keepers)]
        procs = [mp.Process(target=_durable_writer, args=(p, 2 * size_bytes, overwrite, ready, start, out))
                 for p in paths]
        for p in procs:
            p.start()
        for _ in procs:
            ready.get(timeout=600)  # every payload in memory, every spare on disk
        start.set()
        slowest = max(out.get(timeout=600) for _ in procs)
        for p in procs:
            p.join()
        for path in paths:
            os.remove(path)
        best = max(best, size_bytes / slowest / 1e9)
    return best


# ---- Gloo -------------------------------------------------------------------------------


def _gloo_rank(rank, world, port, numel, repeats, out):
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world)
    t = torch.ones(numel, dtype=torch.float32)
    dist.all_reduce(t)  # warm-up: connections and buffers
    times = []
    cpu_start = time.process_time()  # every thread of this rank, Gloo's own included
    for _ in range(repeats):
        dist.barrier()
        start = time.perf_counter()
        dist.all_reduce(t)
        t.div_(world)
        dist.barrier()  # every rank holds the result
        times.append(time.perf_counter() - start)
    out.put((rank, statistics.median(times), (time.process_time() - cpu_start) / repeats))
    dist.destroy_process_group()


def gloo_all_reduce(size_bytes, world, repeats=5):
    """Gloo's all-reduce of `size_bytes` across `world` processes: (GB/s from rank 0's median
    time, the CPU seconds one all-reduce costs every rank together)."""
    port = free_port()
    out = mp.Queue()
    procs = [mp.Process(target=_gloo_rank, args=(r, world, port, size_bytes // 4, repeats, out)) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + 600
    ranks = {}
    while len(ranks) < world:
        try:
            rank, median, cpu = out.get(timeout=1)
            ranks[rank] = (median, cpu)
        except queue.Empty:
            # A rank that died (no torch in this Python, a port taken) would leave the
            # others waiting for it: say so at once instead of at the deadline.
            failed = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                for p in procs:
                    p.kill()
                sys.exit(f"averaging.py: Gloo's all-reduce failed (rank exit codes {failed or 'none, timed out'}); "
                         f"it needs torch for {sys.executable} (Debian: python3-torch, run by /usr/bin/python3)")
    for p in procs:
        p.join()
    return size_bytes / ranks[0][0] / 1e9, sum(cpu for _, cpu in ranks.values())


# ---- Atoll ------------------------------------------------------------------------------


def mlp_width(size_bytes):
    # mlp parameters: Linear(16, W) + Linear(W, 1) = 18 W + 1 values of 4 bytes
    return max(1, (size_bytes // 4 - 1) // 18)


# Bytes a value takes on the wire (docs/design.md, "The codecs"): the code, and one fp32 scale
# per chunk of 256 values for the low-bit codecs.
WIRE_BYTES_PER_VALUE = {"fp32": 4.0, "bf16": 2.0, "fp16": 2.0, "int8": 1 + 4 / 256, "fp4": 0.5 + 4 / 256}


def encoded_bytes(size_bytes, codec):
    """The fragment's bytes in `codec`; None for a codec whose size depends on its values (topk)."""
    per_value = WIRE_BYTES_PER_VALUE.get(codec)
    return None if per_value is None else size_bytes / 4 * per_value


def allreduce_bytes_per_node(size_bytes, workers, codec):
    """A ring all-reduce's bytes per node, sent + received: 2(M-1)/M of the encoded fragment each way."""
    encoded = encoded_bytes(size_bytes, codec)
    return None if encoded is None else 2 * 2 * (workers - 1) / workers * encoded


def ring_bound_s(size_bytes, workers, codec, mbit, tcp_gbps):
    """The ring all-reduce's time on links of `mbit` Mbit/s each way (0: the loopback TCP bound):
    2(M-1)/M of the encoded fragment through each node's link, both ways at once."""
    encoded = encoded_bytes(size_bytes, codec)
    bytes_per_s = mbit * 1e6 / 8 if mbit else tcp_gbps * 1e9
    return None if encoded is None else 2 * (workers - 1) / workers * encoded / bytes_per_s


COMMITTING = re.compile(r"^\[\s*([0-9.]+) .*coordinator \d+: committing round (\d+), ([0-9.]+) s after the last "
                        r"contribution(?:.*\((\d+) bytes to (\d+) keepers, (\d+) in this process\))?")
ACKNOWLEDGED = re.compile(r"^\[\s*([0-9.]+) .*coordinator \d+: keeper/\d+ acknowledged round (\d+) ")
WROTE = re.compile(r"keeper: wrote fragment \d+ round (\d+) \((\d+) bytes[^)]*\) in ([0-9.]+) s")


def fmt_s(seconds):
    return "?" if seconds is None else f"{seconds:.3f} s"


def commit_phases(log_dir, first):
    """Medians over rounds `first`.. of the coordinator's debug log (each process stamps its own
    lines): last contribution in -> the commit starts (average, outer step, encoding), and
    the commit starts -> the last keeper's acknowledgement (copy and digest, transfer, write,
    fdatasync); the slower keeper's write and bytes; and the busiest node's record bytes
    over its link a round (sent to keepers on other nodes + received by its keepers from
    coordinators elsewhere; a log per node)."""
    averages, commits, writes, written, node_keeper_bytes = [], [], {}, {}, []
    for name in sorted(os.listdir(log_dir)) if os.path.isdir(log_dir) else []:
        started, acked, kept = {}, {}, {}
        crossing = {}  # round -> this node's record bytes over its link: sent to keepers elsewhere, received
        with open(os.path.join(log_dir, name), errors="replace") as f:
            for line in f:
                if m := WROTE.search(line):  # a keeper's write (and fdatasync): the slower keeper's counts
                    writes[int(m[1])] = max(writes.get(int(m[1]), 0.0), float(m[3]))
                    # A keeper (one a log) writes a record per unit: with shards, S a round.
                    kept[int(m[1])] = kept.get(int(m[1]), 0) + int(m[2])
                    crossing[int(m[1])] = crossing.get(int(m[1]), 0) + int(m[2])
                elif m := COMMITTING.match(line):
                    started[int(m[2])] = float(m[1])
                    if int(m[2]) >= first:
                        averages.append(float(m[3]))
                    if m[4] is not None:  # sent to keepers elsewhere; those here did not receive over a link
                        size, keepers, local = int(m[4]), int(m[5]), int(m[6])
                        crossing[int(m[2])] = crossing.get(int(m[2]), 0) + size * (keepers - local) - size * local
                elif m := ACKNOWLEDGED.match(line):
                    acked[int(m[2])] = float(m[1])  # the last one wins: the slower keeper
        commits += [acked[r] - t for r, t in started.items() if r >= first and r in acked]
        for r, b in kept.items():
            written[r] = max(written.get(r, 0), b)
        measured = [b for r, b in crossing.items() if r >= first]
        if measured:
            node_keeper_bytes.append(statistics.median(measured))
    median = lambda xs: statistics.median(xs) if xs else None
    return (median(averages), median(commits), median([t for r, t in writes.items() if r >= first]),
            median([b for r, b in written.items() if r >= first]), max(node_keeper_bytes, default=None))


def run_settings(size_bytes, workers, codec, rounds, early_results, sync, keepers, shards, record="result",
                 sync_every=2):
    """The run's --set options, the same for `atoll local` and `atoll up`: the mlp example sized
    so that its one fragment has `size_bytes` (at batch 1 a step is a few milliseconds: the
    workers do little but sync), a round every two steps."""
    settings = {"run.example": "mlp", "run.steps": sync_every * rounds, "model.heads": 1,
                "model.width": mlp_width(size_bytes), "diloco.sync_every": sync_every, "diloco.codec": codec,
                "diloco.error_feedback": "true" if codec != "fp32" else "false", "inner.batch_size": 1,
                "run.eval_every": 10 ** 9, "storage.keep_rounds": 1,
                "net.max_frame_mb": max(64, 2 * size_bytes // MIB), "run.min_workers": workers,
                "run.threads_per_worker": 1, "cluster.lease_ms": 120000,
                "diloco.early_results": "true" if early_results else "false", "storage.sync": sync,
                "storage.keepers": keepers, "diloco.shards": shards, "diloco.round_record": record}
    return [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]


def launch_local(atoll, run_dir, workers, links, settings):
    """`atoll local`: every process on this machine's loopback. Returns their CPU (TreeCpu)."""
    cmd = [atoll, "local", "--nodes", str(workers), "--run-dir", run_dir] + settings
    if links == "plain":
        cmd.append("--plain-links")
    # Debug logging adds a few lines a round: the coordinator's commit timings (commit_phases).
    env = dict(os.environ, ATOLL_LOG="debug")
    with open(os.path.join(run_dir, "local.log"), "w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        cpu = procstat.TreeCpu([proc.pid])  # atoll local and every process it starts
        try:
            code = proc.wait(timeout=1800)
        finally:
            cpu.stop()
        if code != 0:
            log.seek(0)
            sys.exit(f"averaging: atoll local failed ({' '.join(cmd)}):\n{log.read()[-3000:]}")
    return cpu


def launch_shaped(atoll, run_dir, workers, links, settings, mbit):
    """A head and `workers` nodes, each in its own network namespace with its link shaped to
    `mbit` (tools/bench/benchlib/netns.py); returns each node's link bytes (in + out) over the run
    and every Atoll process's CPU (TreeCpu)."""
    netns.shape(workers, mbit)
    head_ep = f"tcp://{netns.HEAD_IP}:7070"
    keys = []
    if links == "curve":
        netns.sh(atoll, "keygen", "--out", os.path.join(run_dir, "keys"))
        keys = ["--keys", os.path.join(run_dir, "keys")]
    security = keys or ["--insecure"]  # plain links off loopback must be asked for by name
    log_dir = os.path.join(run_dir, "logs")
    os.makedirs(log_dir)
    env = dict(os.environ, ATOLL_LOG="debug")
    logs = []

    def start(ns, args):
        log = open(os.path.join(log_dir, f"{ns}.log"), "w")
        logs.append(log)
        return subprocess.Popen(["ip", "netns", "exec", ns, atoll] + args + security, stdout=log,
                                stderr=subprocess.STDOUT, env=env)

    nodes = netns.names(workers)[1:]
    before = {ns: netns.link_bytes(ns) for ns in nodes}
    cpu = procstat.TreeCpu([])  # the head, every node and what they start
    head = start(netns.HEAD, ["up", "--listen", head_ep, "--run-dir", os.path.join(run_dir, "head"), "--metrics",
                              os.path.join(run_dir, "metrics.jsonl")] + settings)
    time.sleep(1.0)
    cpu.add_root(head.pid)
    joined = [start(ns, ["join", "--head", head_ep, "--threads", "1", "--run-dir", os.path.join(run_dir, ns)])
              for ns in nodes]
    for n in joined:
        cpu.add_root(n.pid)
    try:
        codes = [n.wait(timeout=1800) for n in joined]
    finally:
        cpu.stop()
    moved = {ns: netns.link_bytes(ns) - before[ns] for ns in nodes}
    netns.sh("ip", "netns", "exec", netns.HEAD, atoll, "down", "--head", head_ep, *keys, check=False)
    head.wait(timeout=60)
    for log in logs:
        log.close()
    if any(codes):
        sys.exit(f"averaging: a node failed ({codes}) at {mbit} Mbit/s; logs in {log_dir}")
    return moved, cpu


def round_timings(metrics_path, workers, shards, warmup):
    """Each measured round's times from the head's metrics (see the module's docstring)."""
    # With shards, a round is S units' rounds (one coordinator each): it ends when the last
    # worker has applied the last slice's result.
    released, acks = {}, {}
    to_unix = None  # the metrics' "time" -> time.time(), for the CPU samples
    with open(metrics_path) as f:
        for line in f:
            j = json.loads(line)
            if to_unix is None and "unix_s" in j:
                to_unix = j["unix_s"] - j["time"]
            if j.get("type") == "round":
                released.setdefault(j["round"], []).append(j)
            elif j.get("type") == "ack":
                # (the head's time of the ack, the worker's seconds since it started sending)
                acks.setdefault(j["round"], []).append((j["time"], j.get("since_contributed_s")))
    times, commit_shares, releases, helds, sends, spans = [], [], [], [], [], []
    for r, reps in sorted(released.items()):
        if r <= warmup or len(reps) < shards or len(acks.get(r, [])) < workers * shards:
            continue  # round 1 includes start-up, the next ones fault in heaps
        if any(since is None for _, since in acks[r]):
            sys.exit(f"averaging: round {r}'s acknowledgements do not say when their workers sent (an older atoll?)")
        merged = max(t for t, _ in acks[r])  # the last worker has applied the result
        last_send = max(t - since for t, since in acks[r])  # the last worker starts sending
        last_in = max(rep["time"] - rep["since_last_contribution_s"] for rep in reps)  # every contribution in
        last_release = max(rep["time"] for rep in reps)
        total = merged - last_send
        times.append(total)
        spans.append((last_send + (to_unix or 0.0), merged + (to_unix or 0.0)))
        sends.append(max(0.0, last_in - last_send))
        releases.append(max(rep["since_last_contribution_s"] for rep in reps))
        helds.append(max(0.0, merged - last_release))
        commit_shares.append(releases[-1] / total if total > 0 else 0.0)
    if not times:
        sys.exit(f"averaging: no complete round after the first {warmup} in {os.path.dirname(metrics_path)}")
    return times, sends, releases, helds, commit_shares, spans


def cpu_per_round(cpu, spans):
    """Every Atoll process's CPU seconds a round, from the first measured round's last send to
    the last's merge over the rounds in between (the two inner steps between rounds included:
    about 0.09 CPU s each a worker at 64 MiB; training_cpu_s measures them to subtract)."""
    if not spans or cpu is None:
        return None
    first, last = spans[0][0], spans[-1][1]
    return (cpu.cpu_at(last) - cpu.cpu_at(first)) / len(spans)


def training_cpu_s(atoll, run_dir, size_bytes, workers, rounds, links):
    """Every Atoll process's CPU seconds over a run of the same steps, model and processes as a
    measured row's, with no round (diloco.sync_every past its steps): start-up and the inner
    steps, which a row's total less this leaves to its rounds (cpu_s_per_round_net)."""
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(run_dir)
    steps = 2 * rounds  # run_settings' two steps a round
    settings = run_settings(size_bytes, workers, "int8", rounds, True, "replicated", "nodes", 1)
    settings += ["--set", f"diloco.sync_every={steps + 1}"]
    cpu = launch_local(atoll, run_dir, workers, links, settings)
    shutil.rmtree(run_dir, ignore_errors=True)
    return cpu.total()


def atoll_run(atoll, run_dir, size_bytes, workers, codec, rounds, links="curve", early_results=True, warmup=1,
              sync="replicated", keepers="nodes", shards=1, mbit=0, record="result"):
    if os.path.exists(run_dir):
        shutil.rmtree(run_dir)
    os.makedirs(run_dir)
    started = time.time()
    settings = run_settings(size_bytes, workers, codec, rounds, early_results, sync, keepers, shards, record)
    moved = None
    if mbit:
        moved, cpu = launch_shaped(atoll, run_dir, workers, links, settings, mbit)
    else:
        cpu = launch_local(atoll, run_dir, workers, links, settings)
    times, sends, releases, helds, commit_shares, spans = round_timings(os.path.join(run_dir, "metrics.jsonl"),
                                                                       workers, shards, warmup)
    median = statistics.median(times)
    average_s, commit_s, write_s, commit_bytes, keeper_bytes = commit_phases(os.path.join(run_dir, "logs"), warmup + 1)
    result = {"atoll_round_s": median, "atoll_gbps": size_bytes / median / 1e9,
              "atoll_send_s": statistics.median(sends), "atoll_release_s": statistics.median(releases),
              "atoll_coordinator_share": statistics.median(commit_shares), "rounds_measured": len(times),
              "atoll_average_s": average_s, "atoll_commit_s": commit_s, "atoll_keeper_write_s": write_s,
              "commit_bytes_per_keeper": commit_bytes, "keeper_bytes_per_node": keeper_bytes,
              "cpu_s_per_round": cpu_per_round(cpu, spans), "cpu_s_total": cpu.total(),
              "atoll_results_s": statistics.median(helds),
              "run_wall_s": time.time() - started}
    if moved is not None:
        # Every round moves the same bytes, and start-up and heartbeats are a few kB: the
        # run's bytes over its rounds. The busiest node bounds a round (the star's centre).
        per_round = [b / rounds for b in moved.values()]
        result.update({"bytes_per_node": max(per_round), "bytes_per_node_mean": statistics.mean(per_round)})
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--sizes", default="16,64,256", help="fragment sizes in MiB")
    ap.add_argument("--workers", default="2,4")
    ap.add_argument("--codecs", default="fp32,int8")
    ap.add_argument("--rounds", type=int, default=6, help="rounds per Atoll run")
    ap.add_argument("--warmup-rounds", type=int, default=1,
                    help="rounds not measured at the start of each Atoll run (start-up, heaps faulted in)")
    ap.add_argument("--bounds-only", action="store_true",
                    help="print the TCP bound and the commit's disk bound (overwriting a spare, and "
                         "writing a new file) for each size; run neither Atoll nor Gloo")
    ap.add_argument("--links", default="curve,plain",
                    help="Atoll's links: curve (encrypted, the default of every cluster) and/or plain "
                         "(`atoll local --plain-links`: unencrypted TCP, as Gloo's)")
    ap.add_argument("--sync", default="replicated",
                    help="storage.sync: replicated (the default) and/or fsync, e.g. replicated,fsync")
    ap.add_argument("--keepers", default="nodes",
                    help="storage.keepers: nodes (the default: two replicas on nodes) and/or head (the head's "
                         "keeper and one replica), e.g. nodes,head")
    ap.add_argument("--early-results", default="on",
                    help="diloco.early_results: on (the default: results travel while the round commits) "
                         "and/or off (results after the commit), e.g. on,off for both, run by run")
    ap.add_argument("--mbit", type=int, default=0,
                    help="shape each node's link to this many Mbit/s both ways, each node and the head in a network "
                         "namespace of its own (tools/bench/benchlib/netns.py; needs root); 0: loopback, unshaped")
    ap.add_argument("--records", default="result",
                    help="diloco.round_record: result (the default: a round's record is the change its workers "
                         "receive) and/or inputs (what it averaged, or their fp32 average), e.g. result,inputs")
    ap.add_argument("--shards", default="auto",
                    help="diloco.shards: slices the fragment's round is reduced in, each by its own coordinator; "
                         "a number and/or auto (one slice per worker, the default's choice here), e.g. 1,auto")
    args = ap.parse_args()
    if not 1 <= args.warmup_rounds < args.rounds:
        sys.exit(f"averaging.py: --warmup-rounds must be at least 1 and below --rounds ({args.rounds})")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "averaging")  # run.json: command, date, machine, revision
    if args.mbit:
        netns.require_root("averaging")
        netns.setup_or_exit("averaging", max(int(w) for w in args.workers.split(",")))
    try:
        results = measure(args)
    finally:
        if args.mbit:
            netns.teardown()
    if args.bounds_only:
        return
    print_tables(results)
    print(f"\nwrote {os.path.join(args.out, 'results.json')}")


def measure(args):
    results = []
    for size_mb in [int(s) for s in args.sizes.split(",")]:
        size = size_mb * MIB
        tcp = tcp_bound_gbps(size)
        disk = commit_disk_bound_gbps(size, args.out)
        if args.bounds_only:
            new_file = commit_disk_bound_gbps(size, args.out, overwrite=False)
            print(f"bounds: {size_mb} MiB: tcp {tcp:.3f} GB/s, commit disk {disk:.3f} GB/s overwriting a spare, "
                  f"{new_file:.3f} GB/s to new files", flush=True)
            continue
        for workers in [int(w) for w in args.workers.split(",")]:
            gloo, gloo_cpu = gloo_all_reduce(size, workers)
            trained = {}  # links -> the CPU of the same run without rounds (loopback rows only)
            grid = [(c, l, e, s, k, h, rec) for l in args.links.split(",") for c in args.codecs.split(",")
                    for e in args.early_results.split(",") for s in args.sync.split(",")
                    for k in args.keepers.split(",") for h in args.shards.split(",")
                    for rec in args.records.split(",")]
            for codec, links, early, sync, keepers, shards, record in grid:
                if record not in ("result", "inputs"):
                    sys.exit(f"averaging.py: --records takes result and/or inputs, not {record!r}")
                if shards != "auto" and not shards.isdigit():
                    sys.exit(f"averaging.py: --shards takes numbers and/or auto, not {shards!r}")
                shards = workers if shards == "auto" else int(shards)
                if early not in ("on", "off"):
                    sys.exit(f"averaging.py: --early-results takes on and/or off, not {early!r}")
                if sync not in ("replicated", "fsync"):
                    sys.exit(f"averaging.py: --sync takes replicated and/or fsync, not {sync!r}")
                if keepers not in ("nodes", "head"):
                    sys.exit(f"averaging.py: --keepers takes nodes and/or head, not {keepers!r}")
                run_dir = os.path.join(
                    args.out, f"run-{size_mb}-{workers}-{codec}-{links}-{early}-{sync}-{keepers}-{shards}-{record}")
                a = atoll_run(os.path.abspath(args.atoll), os.path.abspath(run_dir), size, workers, codec,
                              args.rounds, links, early == "on", args.warmup_rounds, sync, keepers, shards, args.mbit,
                              record)
                shutil.rmtree(run_dir, ignore_errors=True)  # the keeper's copies are large
                net = None
                # Below 10 rounds the start-up's spread between two runs (a few tenths of a CPU
                # second) outweighs what the rounds cost: no net figure.
                if not args.mbit and args.rounds >= 10:
                    if links not in trained:
                        trained[links] = training_cpu_s(os.path.abspath(args.atoll), os.path.abspath(run_dir) + "-nosync",
                                                        size, workers, args.rounds, links)
                    net = (a["cpu_s_total"] - trained[links]) / args.rounds
                row = {"size_mb": size_mb, "workers": workers, "codec": codec, "links": links,
                       "early_results": early == "on", "sync": sync, "keepers": keepers, "shards": shards,
                       "round_record": record,
                       "commit_bytes_per_keeper": a["commit_bytes_per_keeper"],
                       "keeper_bytes_per_node": a["keeper_bytes_per_node"],
                       "cpu_s_per_round": a["cpu_s_per_round"], "cpu_s_per_round_net": net, "gloo_cpu_s": gloo_cpu,
                       "atoll_gbps": a["atoll_gbps"], "gloo_gbps": gloo, "tcp_bound_gbps": tcp,
                       "commit_disk_bound_gbps": disk,
                       "atoll_round_s": a["atoll_round_s"], "atoll_send_s": a["atoll_send_s"],
                       "atoll_release_s": a["atoll_release_s"],
                       "atoll_coordinator_share": a["atoll_coordinator_share"],
                       "atoll_average_s": a["atoll_average_s"], "atoll_commit_s": a["atoll_commit_s"],
                       "atoll_results_s": a["atoll_results_s"], "atoll_keeper_write_s": a["atoll_keeper_write_s"],
                       "rounds_measured": a["rounds_measured"], "warmup_rounds": args.warmup_rounds,
                       "mbit": args.mbit, "round_s": a["atoll_round_s"],
                       "ring_bound_s": ring_bound_s(size, workers, codec, args.mbit, tcp),
                       "allreduce_bytes_per_node": allreduce_bytes_per_node(size, workers, codec),
                       "bytes_per_node": a.get("bytes_per_node"), "bytes_per_node_mean": a.get("bytes_per_node_mean")}
                results.append(row)
                print(f"averaging: {size_mb} MiB, M={workers}, {codec}, {links} links, early results {early}, "
                      f"sync {sync}, keepers on {keepers}, shards {shards}: "
                      f"atoll {a['atoll_gbps']:.3f} GB/s "
                      f"({a['atoll_round_s']:.3f} s/round; last send to all in {a['atoll_send_s']:.3f} s, "
                      f"last contribution to release {a['atoll_release_s']:.3f} s, "
                      f"{a['atoll_coordinator_share']:.0%}; average {fmt_s(a['atoll_average_s'])}, "
                      f"commit {fmt_s(a['atoll_commit_s'])} (keeper write {fmt_s(a['atoll_keeper_write_s'])}, "
                      f"{a['commit_bytes_per_keeper']} bytes a keeper), "
                      f"results {fmt_s(a['atoll_results_s'])}), "
                      f"gloo {gloo:.3f} GB/s, tcp bound {tcp:.3f} GB/s, commit disk bound {disk:.3f} GB/s", flush=True)
                with open(os.path.join(args.out, "results.json"), "w") as f:
                    json.dump(results, f, indent=1)
    return results


def markdown(results):
    """The tables of results.json's rows (tools/bench/report.py averaging DIR)."""
    out = []
    cpu = lambda r, k: "" if r.get(k) is None else f"{r[k]:.3f}"
    cpu_ratio = lambda r: ("" if r.get("cpu_s_per_round_net") is None or not r.get("gloo_cpu_s")
                           else f"{r['cpu_s_per_round_net'] / r['gloo_cpu_s']:.2f}")
    out.append("| MiB | M | codec | record | links | early results | sync | keepers | shards | commit MiB/keeper "
               "| Atoll GB/s | Gloo GB/s | TCP bound GB/s | commit disk bound GB/s | Atoll / Gloo | Atoll / TCP "
               "| Atoll CPU s a round | the same less its steps | Gloo CPU s an all-reduce | CPU Atoll (less steps) / Gloo |")
    out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        mib = "?" if r["commit_bytes_per_keeper"] is None else f"{r['commit_bytes_per_keeper'] / MIB:.1f}"
        out.append(f"| {r['size_mb']} | {r['workers']} | {r['codec']} | {r.get('round_record', 'inputs')} | "
                   f"{r['links']} | {'on' if r['early_results'] else 'off'} | {r['sync']} | {r['keepers']} | "
                   f"{r['shards']} | {mib} | {r['atoll_gbps']:.3f} | {r['gloo_gbps']:.3f} | "
                   f"{r['tcp_bound_gbps']:.3f} | {r['commit_disk_bound_gbps']:.3f} | {r['atoll_gbps'] / r['gloo_gbps']:.2f} | "
                   f"{r['atoll_gbps'] / r['tcp_bound_gbps']:.2f} | {cpu(r, 'cpu_s_per_round')} | "
                   f"{cpu(r, 'cpu_s_per_round_net')} | {cpu(r, 'gloo_cpu_s')} | "
                   f"{cpu_ratio(r)} |")
    shaped = [r for r in results if r["mbit"] and r["ring_bound_s"] is not None]
    if shaped:
        out.append("")
        out.append("Shaped links (each node's link at the given Mbit/s both ways; bytes sent + received per node per "
                   "round through the busiest node's link, a keeper's record included):")
        out.append("| MiB | M | codec | record | links | Mbit/s | shards | round s | ring bound s | round / ring bound "
                   "| MB per node | a keeper's MB | keepers' MB on the busiest link | keepers' share "
                   "| all-reduce MB per node | MB / all-reduce's |")
        out.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for r in shaped:
            kept = "?" if r["commit_bytes_per_keeper"] is None else f"{r['commit_bytes_per_keeper'] / 1e6:.1f}"
            node_kept = r.get("keeper_bytes_per_node")
            share = "?" if node_kept is None else f"{node_kept / r['bytes_per_node']:.0%}"
            node_kept = "?" if node_kept is None else f"{node_kept / 1e6:.1f}"
            out.append(f"| {r['size_mb']} | {r['workers']} | {r['codec']} | {r.get('round_record', 'inputs')} | "
                       f"{r['links']} | {r['mbit']} | {r['shards']} | "
                       f"{r['round_s']:.2f} | {r['ring_bound_s']:.2f} | {r['round_s'] / r['ring_bound_s']:.2f} | "
                       f"{r['bytes_per_node'] / 1e6:.1f} | {kept} | {node_kept} | {share} | "
                       f"{r['allreduce_bytes_per_node'] / 1e6:.1f} | {r['bytes_per_node'] / r['allreduce_bytes_per_node']:.2f} |")
    return "\n".join(out)


def print_tables(results):
    print("\n" + markdown(results))


if __name__ == "__main__":
    main()
