#!/usr/bin/env python3
"""The head at scale: a real head (`atoll up`, the embedded store) against N simulated nodes.

Each simulated node is the real node agent and worker over its own ZeroMQ connection to the
head (tools/sim_nodes: Hello, heartbeats, leases, Membership and PeerTable handling, Goodbye);
only the model is a stand-in (64 fp32 values, a step that waits --step-ms, default 200, a
round every --sync-every steps, default 50), packed 250 to an `atoll_sim_nodes` process. Nodes do not listen, so the head relays
their rounds' tensors: 256 bytes a contribution every 10 s, a few per cent of what the control
plane moves. The keepers are the head's (`storage.keepers = head`).

For each N in --nodes:
1. the head starts, then the simulated nodes, --start-interval-ms apart (default 2) within each
   process; the ramp lasts
   until every node has found itself in a PeerTable (a member of a published epoch);
2. steady state for --seconds: the head's CPU (from /proc, fraction of one core), its
   resident memory, the bytes its connections sent and received (the kernel's per-socket
   counters, `ss -ti`) per node per second, rounds committed per second, and the harness's
   own CPU (the simulated nodes share this machine's cores with the head);
3. `atollctl status --json`, timed (median of three);
4. with --churn, for --seconds more, at --churn-rate events a second in all (kills: the
   connection closes; silences: heartbeats stop; leaves: a Goodbye; and as many joins as
   losses), then a lease more for the silences to be judged. Each fault is timed from the
   fault to the first PeerTable without the node that another node received; each join from
   the node's start to the first PeerTable naming it.

With --registry etcd the head keeps the registry on a three-member etcd started here (its
members on the same cores) instead of its embedded RocksDB. Each window also reads the
registry's own writes (`atollctl status`: registry_writes) and the epochs it went through.

Writes DIR/results.json: a list of rows {nodes, churn, registry, epochs,
registry_writes_per_epoch, registry_bytes_per_epoch (None without a new epoch), head_cpu, head_rss_mb,
largest_envelope (per payload kind, the largest envelope the head sent or received, bytes), actor_deaths,
control_bytes_per_node_s_in, control_bytes_per_node_s_out (the head's view: what it received
and sent), join_s_median, join_s_p99, kill_s_median, silence_s_median, leave_s_median,
status_s, rounds_per_s, ramp_s, harness_cpu, joined, lease_ms, heartbeat_ms} and prints a table.
A row whose head died, whose status did not answer, or with a figure missing or negative fails
the bench (exit status 1) instead of being written.
"""
import argparse
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time

from benchlib import provenance  # tools/bench/benchlib, next to this script
from benchlib.cluster import ClusterDied, wait_for_endpoint
from benchlib.etcd import Etcd
from benchlib.procstat import cpu_seconds, rss_mb

NODES_PER_PROCESS = 250


def head_socket_bytes(port):
    """(received, sent) over the head's established connections on `port`, from the kernel."""
    out = subprocess.run(["ss", "-tinH", "state", "established", f"( sport = :{port} )"], capture_output=True,
                         text=True).stdout
    received = sum(int(x) for x in re.findall(r"bytes_received:(\d+)", out))
    sent = sum(int(x) for x in re.findall(r"bytes_sent:(\d+)", out))
    return received, sent


class sim_events(threading.Thread):
    """Reads one atoll_sim_nodes process's JSON lines: its events, stamped with the bench's clock."""

    def __init__(self, proc):
        super().__init__(daemon=True)
        self.proc, self.events, self.lock = proc, [], threading.Lock()

    def run(self):
        for line in self.proc.stdout:
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            event["at"] = time.monotonic()
            with self.lock:
                self.events.append(event)

    def of(self, kind, since=0.0):
        with self.lock:
            return [e for e in self.events if e["event"] == kind and e["at"] >= since]


def median(xs):
    return statistics.median(xs) if xs else None


def p99(xs):
    return sorted(xs)[min(len(xs) - 1, math.ceil(0.99 * len(xs)) - 1)] if xs else None


def run_size(args, nodes, churn):
    out = os.path.join(args.out, f"n{nodes}{'-churn' if churn else ''}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    head_log = open(os.path.join(out, "head.log"), "w")
    # --pin-head: the head alone on CPU 0 and the harness on the others, so that what the
    # head measures is its own and the simulated nodes cannot starve it.
    head_cpus = ["taskset", "-c", "0"] if args.pin_head else []
    sim_cpus = ["taskset", "-c", f"1-{os.cpu_count() - 1}"] if args.pin_head else []
    # --registry etcd: the registry's state on a three-member etcd started here (the head
    # writes there instead of its embedded RocksDB).
    # A head on etcd takes storage.keepers = nodes (a head that takes over must find the
    # rounds); the simulated nodes keep none, so the rounds still go to the head's keeper.
    etcd = Etcd(out, prefix="scale") if args.registry == "etcd" else None
    registry = ["--registry", etcd.url()] if etcd else []
    keepers = "nodes" if etcd else "head"
    head = subprocess.Popen(head_cpus + [args.atoll, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", os.path.join(out, "head"),
                             "--metrics", os.path.join(out, "metrics.jsonl"),
                             "--set", "run.example=mlp", "--set", f"run.steps={10 ** 9}", "--set", "run.min_workers=2",
                             "--set", f"diloco.sync_every={args.sync_every}", "--set", f"storage.keepers={keepers}",
                             "--set", f"cluster.heartbeat_ms={args.heartbeat_ms}",
                             "--set", f"cluster.lease_ms={args.lease_ms}"] + registry,
                            stdout=head_log, stderr=subprocess.STDOUT)
    sims, readers, endpoint = [], [], None
    try:
        try:
            endpoint = wait_for_endpoint(os.path.join(out, "head"), head, log=head_log.name)
        except ClusterDied as e:
            sys.exit(f"scale: {e}")
        port = int(endpoint.rsplit(":", 1)[1])
        processes = max(1, math.ceil(nodes / NODES_PER_PROCESS))
        # Losses at churn_rate a second, split kills 45%, leaves 45%, silences 10%; as many joins.
        rate = args.churn_rate / processes
        for i in range(processes):
            count = nodes // processes + (1 if i < nodes % processes else 0)
            cmd = sim_cpus + [args.sim, "--head", endpoint, "--nodes", str(count), "--values", "64", "--step-ms", str(args.step_ms),
                   "--seconds", str(10 ** 6), "--churn-after", str(10 ** 6), "--seed", str(i + 1),
                   "--start-interval-ms", str(args.start_interval_ms),
                   "--kills", str(0.45 * rate), "--leaves", str(0.45 * rate), "--silences", str(0.1 * rate),
                   "--joins", str(rate)]
            sims.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=open(os.path.join(out, f"sim{i}.log"), "w"),
                                         text=True))
            readers.append(sim_events(sims[-1]))
            readers[-1].start()
        started = time.monotonic()
        joined = lambda: sum(len(r.of("joined")) for r in readers)
        while joined() < nodes and time.monotonic() - started < args.ramp_timeout:
            if any(s.poll() is not None for s in sims):
                sys.exit(f"scale: a simulated-node process exited; logs in {out}")
            time.sleep(0.2)
        ramp_s = time.monotonic() - started
        ramp_joins = [e["s"] for r in readers for e in r.of("joined")]
        if len(ramp_joins) < nodes:
            print(f"scale: {len(ramp_joins)} of {nodes} nodes joined within {args.ramp_timeout} s", flush=True)
        time.sleep(2)  # the last joins' tables settle

        def window(seconds):
            require_alive(head, out)
            cpu0, sims0, bytes0, t0 = cpu_seconds(head.pid), sum(cpu_seconds(s.pid) for s in sims), \
                head_socket_bytes(port), time.monotonic()
            rounds0 = count_rounds(os.path.join(out, "metrics.jsonl"))
            status0 = status_of(args.atollctl, endpoint)
            time.sleep(seconds)
            elapsed = time.monotonic() - t0
            bytes1 = head_socket_bytes(port)
            status1 = status_of(args.atollctl, endpoint)
            require_alive(head, out)
            if not status0 or not status1:
                sys.exit(f"scale: `atollctl status` did not answer around the window; logs in {out}")
            return {**writes_per_epoch(status0, status1),
                    "head_cpu": (cpu_seconds(head.pid) - cpu0) / elapsed,
                    "harness_cpu": (sum(cpu_seconds(s.pid) for s in sims) - sims0) / elapsed,
                    "control_bytes_per_node_s_in": (bytes1[0] - bytes0[0]) / elapsed / max(1, len(ramp_joins)),
                    "control_bytes_per_node_s_out": (bytes1[1] - bytes0[1]) / elapsed / max(1, len(ramp_joins)),
                    "rounds_per_s": (count_rounds(os.path.join(out, "metrics.jsonl")) - rounds0) / elapsed}

        row = {"nodes": nodes, "churn": churn, "registry": args.registry, "joined": len(ramp_joins), "ramp_s": ramp_s,
               "lease_ms": args.lease_ms, "heartbeat_ms": args.heartbeat_ms}
        if not churn:
            row.update(window(args.seconds))
            row.update({"join_s_median": median(ramp_joins), "join_s_p99": p99(ramp_joins),
                        "kill_s_median": None, "silence_s_median": None, "leave_s_median": None})
        else:
            churn_started = time.monotonic()
            for s in sims:
                s.send_signal(signal.SIGUSR1)
            row.update(window(args.seconds))
            for s in sims:
                s.send_signal(signal.SIGUSR2)
            time.sleep(args.lease_ms / 1000 + 2)  # a silence is judged at its lease's end
            of = lambda kind: [e["s"] for r in readers for e in r.of(kind, churn_started)]
            row.update({"join_s_median": median(of("joined")), "join_s_p99": p99(of("joined")),
                        "kill_s_median": median(of("kill")), "silence_s_median": median(of("silence")),
                        "leave_s_median": median(of("leave")),
                        "churn_events": {k: len(of(k)) for k in ("joined", "kill", "silence", "leave")}})
        require_alive(head, out)
        row["head_rss_mb"] = rss_mb(head.pid)
        row["status_s"] = time_status(args.atollctl, endpoint)
        final = status_of(args.atollctl, endpoint)
        row["largest_envelope"] = largest_envelopes(final)
        row["actor_deaths"] = actor_deaths(os.path.join(out, "head.log"))
        require_alive(head, out)
        check_row(row, out)
        return row
    finally:
        for s in sims:
            s.send_signal(signal.SIGTERM)
        if endpoint:
            subprocess.run([args.atoll, "down", "--head", endpoint], capture_output=True)
        for s in sims:
            try:
                s.wait(timeout=120)
            except subprocess.TimeoutExpired:
                s.kill()
        try:
            head.wait(timeout=30)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        head_log.close()
        if etcd:
            etcd.stop()


def require_alive(head, out):
    """A bench whose head died measured nothing: say so and fail, never write its figures."""
    if head.poll() is not None:
        sys.exit(f"scale: the head exited ({head.returncode}) during the run; see {out}/head.log")


def actor_deaths(head_log):
    """Lines where an actor of the head died (CAF's unhandled exception) or a handler threw."""
    with open(head_log, errors="replace") as f:
        return sum(1 for line in f if "unhandled exception" in line or "the actor goes on" in line)


def largest_envelopes(status):
    """The largest envelope (bytes, tensors apart) of each payload kind the head sent or received."""
    kinds = status.get("head_link", {}).get("by_kind", {})
    return {kind: max(v.get("largest_envelope_in", 0), v.get("largest_envelope_out", 0)) for kind, v in kinds.items()}


def check_row(row, out):
    """The invariants the figures rest on: every figure present, finite and non-negative."""
    bad = [k for k in ("head_cpu", "harness_cpu", "control_bytes_per_node_s_in", "control_bytes_per_node_s_out",
                       "rounds_per_s", "epochs", "status_s", "head_rss_mb", "ramp_s")
           if not isinstance(row.get(k), (int, float)) or not math.isfinite(row[k]) or row[k] < 0]
    if row["joined"] < row["nodes"]:
        bad.append(f"joined {row['joined']} of {row['nodes']}")
    if row["actor_deaths"]:
        bad.append(f"{row['actor_deaths']} actor deaths or handler failures in the head's log")
    if bad:
        sys.exit(f"scale: the row of {row['nodes']} nodes{' under churn' if row['churn'] else ''} is not valid "
                 f"({', '.join(map(str, bad))}); logs in {out}\n{json.dumps(row)}")


def status_of(atollctl, endpoint):
    res = subprocess.run([atollctl, "--head", endpoint, "status", "--json"], capture_output=True, text=True)
    return json.loads(res.stdout) if res.returncode == 0 else {}


def writes_per_epoch(before, after):
    """The registry's saves and their bytes per membership epoch between two statuses
    (`registry_writes`: what the head wrote to its store, RocksDB or etcd)."""
    epochs = after.get("epoch", 0) - before.get("epoch", 0)
    w0, w1 = before.get("registry_writes", {}), after.get("registry_writes", {})
    per = lambda key: (w1.get(key, 0) - w0.get(key, 0)) / epochs if epochs > 0 else None
    return {"epochs": epochs, "registry_writes_per_epoch": per("saves"), "registry_bytes_per_epoch": per("bytes")}


def count_rounds(metrics):
    if not os.path.exists(metrics):
        return 0
    with open(metrics) as f:
        return sum(1 for line in f if '"type":"round"' in line.replace(" ", ""))


def time_status(atollctl, endpoint):
    times = []
    for _ in range(3):
        t0 = time.monotonic()
        res = subprocess.run([atollctl, "--head", endpoint, "status", "--json"], capture_output=True, text=True)
        if res.returncode != 0:
            print(f"scale: atollctl status failed: {res.stderr.strip()}", flush=True)
            return None
        times.append(time.monotonic() - t0)
    return statistics.median(times)


def fmt(x, spec):
    return "-" if x is None else format(x, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--atollctl", required=True)
    ap.add_argument("--sim", required=True, help="the atoll_sim_nodes binary")
    ap.add_argument("--out", required=True)
    ap.add_argument("--nodes", default="10,100,1000")
    ap.add_argument("--churn", action="store_true", help="also a row under churn for each N")
    ap.add_argument("--churn-rate", type=float, default=2.0, help="losses a second in all, and as many joins")
    ap.add_argument("--seconds", type=float, default=20, help="length of each measured window")
    ap.add_argument("--ramp-timeout", type=float, default=300, help="seconds for every node to join")
    ap.add_argument("--heartbeat-ms", type=int, default=1000)
    ap.add_argument("--step-ms", type=int, default=200, help="a stand-in step's time")
    ap.add_argument("--start-interval-ms", type=int, default=2, help="between two nodes' starts in a process")
    ap.add_argument("--pin-head", action="store_true",
                    help="the head alone on CPU 0, the simulated nodes on the others (needs 2 CPUs or more)")
    ap.add_argument("--sync-every", type=int, default=50, help="steps between a fragment's rounds")
    ap.add_argument("--lease-ms", type=int, default=10000)
    ap.add_argument("--registry", choices=["embedded", "etcd"], default="embedded",
                    help="where the head keeps the registry: its RocksDB, or a three-member etcd started here")
    args = ap.parse_args()
    if args.pin_head and (os.cpu_count() or 1) < 2:
        sys.exit("scale: --pin-head needs 2 CPUs or more")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "scale")  # tools/bench/report.py scale DIR renders the table
    rows = []
    for nodes in [int(n) for n in args.nodes.split(",")]:
        for churn in ([False, True] if args.churn else [False]):
            row = run_size(args, nodes, churn)
            rows.append(row)
            print(f"scale: {json.dumps(row)}", flush=True)
            with open(os.path.join(args.out, "results.json"), "w") as f:
                json.dump(rows, f, indent=1)
    print("\n| nodes | churn | registry | joined | ramp s | head CPU (cores) | head RSS MB | head in B/node/s "
          "| head out B/node/s | join s median (p99) | kill s | silence s | leave s | status s | rounds/s "
          "| registry writes, bytes per epoch | harness CPU |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        writes = "-" if r["registry_writes_per_epoch"] is None else \
            f"{r['registry_writes_per_epoch']:.2f}, {r['registry_bytes_per_epoch']:.0f}"
        print(f"| {r['nodes']} | {'yes' if r['churn'] else 'no'} | {r['registry']} | {r['joined']} | {r['ramp_s']:.1f} | "
              f"{r['head_cpu']:.3f} | {r['head_rss_mb']:.0f} | {r['control_bytes_per_node_s_in']:.0f} | "
              f"{r['control_bytes_per_node_s_out']:.0f} | {fmt(r['join_s_median'], '.3f')} "
              f"({fmt(r['join_s_p99'], '.3f')}) | {fmt(r['kill_s_median'], '.3f')} | "
              f"{fmt(r['silence_s_median'], '.2f')} | {fmt(r['leave_s_median'], '.3f')} | {fmt(r['status_s'], '.3f')} | "
              f"{r['rounds_per_s']:.2f} | {writes} | {r['harness_cpu']:.2f} |")
    print(f"\nwrote {os.path.join(args.out, 'results.json')}")


if __name__ == "__main__":
    main()
