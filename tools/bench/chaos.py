#!/usr/bin/env python3
"""Chaos benchmark: a local cluster trains while nodes are killed, stopped, drained and
added at random; the same run without faults is the baseline.

Both runs train the default example (a smaller GPT: 2 blocks, width 64) with the same
seed and steps, one `atoll up` and three `atoll join` processes on loopback. During the
chaos run, every --every seconds (jittered) one fault is drawn:
  kill   SIGKILL a node; a replacement node joins --rejoin-after seconds later
  stop   SIGSTOP a node past its lease, then SIGCONT (it is fenced and registers again)
  slow   with --slow: throttle a node to a quarter of its speed for --slow-seconds
         (SIGSTOP/SIGCONT on a 60 ms duty cycle, tools/bench/benchlib/throttle.py): it stays alive,
         and rounds wait for it (or close without it: --round-close adaptive)
  leave  `atoll leave` a node; a replacement joins --rejoin-after seconds later
  join   one more node (up to --max-nodes)
  cpu    saturate the CPU for --hog-seconds with one busy process per core (on one
         machine, every node's CPU at once): no node may be declared dead for it
  head   with --heads 2 (two heads that fail over, on a three-member etcd started here):
         SIGKILL the leading head; the standby takes over; the killed one is started
         again --rejoin-after seconds later on its run dir and stands by
At least two nodes (run.min_workers) stay up; once a worker has finished its steps no new
fault starts. The script polls `atollctl` every second and reads the head's metrics
afterwards. It writes
  OUT/summary.json   rounds_committed, rounds_lost, invariant_violations, max_stall_s,
                     detect_s_median, detect_s_max (and per kind: detect_kill_s_*, detect_stop_s_*),
                     join_productive_s_median, false_evictions, takeover_s_median and
                     takeover_s_max (--heads 2: from a head's kill to the next one listening),
                     faults_injected, val_loss, val_loss_fault_free (and details)
  OUT/timeline.png   committed rounds, live members and faults over time
Invariants checked: every worker's acknowledged digest equals the released digest of its
round (S1), the keeper's round never goes back (S3), every released round is held with
its released digest by some keeper at the end, read from every keeper's store on disk,
the dead nodes' too, with `atoll export --list` (S4), the workers at the final round hold
the keeper's digest (S1), and the run finishes (L1). Both runs use storage.keepers = nodes
(the default: commits to two replicas on nodes, none to the head's keeper; a leaving
replica host hands its replica over first); `--keepers head` runs the head's keeper and
one replica instead.

Usage: tools/bench/chaos.py --atoll build/tools/atoll --atollctl build/tools/atollctl
                            [--minutes N] [--every K] [--seed S] [--keepers nodes|head] [--heads 1|2]
                            [--shards S] [--slow] [--round-close all|adaptive] [--out DIR]
"""
import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import time

from benchlib import cluster, provenance, throttle  # tools/bench/benchlib, next to this script
from benchlib.cluster import free_port
from benchlib.etcd import Etcd
from benchlib.metrics import read_lines
from quality import pyplot_or_none  # tools/bench/quality.py, next to this script

MODEL = ["--set", "model.layers=2", "--set", "model.width=64", "--set", "diloco.sync_every=20",
         "--set", "run.min_workers=2", "--set", "storage.keep_rounds=100000"]
LEASE_MS = 4000
CLUSTER = ["--set", "cluster.heartbeat_ms=500", "--set", f"cluster.lease_ms={LEASE_MS}"]


class Cluster:
    """A head and its nodes, started as real processes; polled through atollctl."""

    def __init__(self, args, run_dir, steps):
        self.args, self.run_dir = args, run_dir
        shutil.rmtree(run_dir, ignore_errors=True)  # an old run dir would be resumed
        os.makedirs(f"{run_dir}/logs", exist_ok=True)
        self.nodes = {}  # pid -> Popen
        self.joined = 0
        self.t0 = time.monotonic()
        self.unix_t0 = time.time()
        self.etcd = Etcd(run_dir) if args.heads > 1 else None
        # Each head: its name, listen endpoint and run dir; self.heads[name] its process.
        self.head_args = {}
        for i in range(args.heads):
            name = "head" if args.heads == 1 else f"head-{'ab'[i]}"
            listen = "tcp://127.0.0.1:0" if args.heads == 1 else f"tcp://127.0.0.1:{free_port()}"
            argv = [args.atoll, "up", "--listen", listen, "--run-dir", f"{run_dir}/{name}",
                    "--metrics", f"{run_dir}/metrics.jsonl", "--set", f"run.steps={steps}",
                    "--set", f"run.seed={args.seed}", "--set", f"run.eval_every={max(20, steps // 4)}"]
            argv += MODEL + CLUSTER + ["--set", f"storage.keepers={args.keepers}", "--set", f"diloco.shards={args.shards}",
                                         "--set", f"diloco.round_close={args.round_close}"]
            if self.etcd:
                argv += ["--registry", self.etcd.url()]
            self.head_args[name] = (listen, argv)
        self.heads = {name: self._spawn(argv, name) for name, (_, argv) in self.head_args.items()}
        self.endpoint = None
        for _ in range(600):
            listening = [self.listening(name) for name in self.heads]
            if any(listening):
                self.endpoint = listening[0] if args.heads == 1 else ",".join(l for l, _ in self.head_args.values())
                break
            time.sleep(0.05)
        if not self.endpoint:
            raise RuntimeError("no head started; see " + f"{run_dir}/logs/")
        # The head's metrics count time from its registry's start, just after it wrote the
        # endpoint: within the 50 ms poll above of now.
        self.metrics_t0 = self.now()

    def now(self):
        return time.monotonic() - self.t0

    def listening(self, name):
        """The endpoint head `name` wrote once it listened (it leads), else None."""
        return cluster.read_endpoint(f"{self.run_dir}/{name}")

    def leader(self):
        """The name of the head that leads now (by `atollctl status`), else None."""
        status = self.ctl("status") or {}
        for name, (listen, _) in self.head_args.items():
            if status.get("head") == listen and self.heads[name].poll() is None:
                return name
        return None

    def restart_head(self, name):
        self.heads[name] = self._spawn(self.head_args[name][1], name)

    def _spawn(self, argv, name):
        return cluster.spawn(argv, f"{self.run_dir}/logs/{name}.log")

    def join(self):
        self.joined += 1
        # Each node has a run dir, so it may host the keeper replica (keeper/1).
        name = f"node{self.joined}"
        p = self._spawn([self.args.atoll, "join", "--head", self.endpoint, "--threads", "1",
                         "--run-dir", f"{self.run_dir}/{name}"], name)
        self.nodes[p.pid] = p
        return p.pid

    def ctl(self, command):
        return cluster.ctl(self.args.atollctl, self.endpoint, command)

    def running_nodes(self):
        return [pid for pid, p in self.nodes.items() if p.poll() is None]

    def stop(self):
        subprocess.run([self.args.atoll, "down", "--head", self.endpoint], capture_output=True, timeout=15)
        for p in list(self.nodes.values()) + list(self.heads.values()):
            if len(self.heads) > 1 and p in self.heads.values():
                p.send_signal(signal.SIGTERM)  # a standby takes over the finished run: stop it too
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def run(args, name, steps, chaos):
    """One run to completion. Returns (metrics lines, observations)."""
    run_dir = os.path.join(args.out, name)
    c = Cluster(args, run_dir, steps)
    for _ in range(3):
        c.join()
    rng = random.Random(args.seed)
    obs = {"faults": [], "polls": [], "deaths": {}, "joins": {}, "pid_of_node": {}, "node_seen": {}, "keeper_rounds": [],
           "regressions": 0, "head_start": c.t0, "metrics_t0": c.metrics_t0, "unix_t0": c.unix_t0, "takeovers": []}
    head_down = None  # (name, killed at) while a killed head waits to be started again
    injected = set()  # pids we killed or stopped: their deaths are not false evictions
    stopped = set()   # pids stopped now: not chosen again until resumed
    pending = []      # (time, action, pid)
    hogs = []         # busy processes of a cpu fault
    throttles = {}    # pid -> the process throttling it (a slow fault)
    next_fault = c.now() + args.every * rng.uniform(0.5, 1.5)
    deadline = c.now() + args.minutes * 60 * 2  # a hung run ends the benchmark
    while c.now() < deadline:
        t = c.now()
        members = c.ctl("members") or []
        frags = c.ctl("fragments") or []
        for m in members:
            if m["node_id"] not in obs["pid_of_node"]:
                obs["node_seen"][m["node_id"]] = t
            obs["pid_of_node"][m["node_id"]] = m["pid"]
            if m["state"] == "dead" and m["node_id"] not in obs["deaths"]:
                obs["deaths"][m["node_id"]] = t
        keeper_round = frags[0].get("keeper_round") if frags else None
        if keeper_round is not None:
            if obs["keeper_rounds"] and keeper_round < obs["keeper_rounds"][-1][1]:
                obs["regressions"] += 1
            obs["keeper_rounds"].append((t, keeper_round))
        obs["polls"].append((t, sum(1 for m in members if m["state"] == "active"),
                             frags[0]["round"] if frags else 0))
        status = c.ctl("status")
        if status and status.get("state") == "finished":
            break
        if head_down and head_down[2] is None:  # a head was killed: has another taken over?
            for name in c.heads:
                path = f"{c.run_dir}/{name}/head.endpoint"
                if name != head_down[0] and os.path.exists(path) and os.path.getmtime(path) > head_down[1]:
                    head_down = (head_down[0], head_down[1], os.path.getmtime(path) - head_down[1])
                    obs["takeovers"].append(head_down[2])
        # The run's tail: once a worker is done, new faults (above all new joiners, which
        # would train on) only delay the end. Nodes already stopped are still resumed, and a
        # cpu fault still ends on time.
        tail = bool(status) and any(w.get("done") for w in status.get("workers", []))
        if tail:
            pending = [p for p in pending if p[1] in ("cont", "unhog", "head", "unslow")]
        for item in [p for p in pending if p[0] <= t]:
            pending.remove(item)
            _, action, pid = item
            if action == "unslow":
                stopped.discard(pid)
                throttles.pop(pid).wait()
            elif action == "cont":
                stopped.discard(pid)
                if c.nodes[pid].poll() is None:
                    os.kill(pid, signal.SIGCONT)
            elif action == "join" and len(c.running_nodes()) < args.max_nodes:
                obs["joins"][c.join()] = c.now()
            elif action == "head":  # the killed head comes back, on its run dir: it stands by
                c.restart_head(pid)
                head_down = None
            elif action == "unhog":
                for hog in hogs:
                    hog.kill()
                    hog.wait()
                hogs.clear()
        if chaos and not tail and t >= next_fault:
            next_fault = t + args.every * rng.uniform(0.5, 1.5)
            alive = [p for p in c.running_nodes() if p not in stopped]
            kinds = ["join"] if len(alive) < args.max_nodes else []
            if len(alive) >= 3:
                kinds += ["kill", "stop", "leave"] + (["slow"] if args.slow else [])
            if not hogs:
                kinds.append("cpu")
            if len(c.heads) > 1 and head_down is None:
                kinds.append("head")
            if kinds:
                kind = rng.choice(kinds)
                pid = rng.choice(alive)
                if kind == "kill":
                    os.kill(pid, signal.SIGKILL)
                    injected.add(pid)
                    pending.append((t + args.rejoin_after, "join", None))
                elif kind == "stop":
                    os.kill(pid, signal.SIGSTOP)
                    injected.add(pid)
                    stopped.add(pid)
                    pending.append((t + LEASE_MS / 1000 + 3, "cont", pid))
                elif kind == "slow":
                    stopped.add(pid)  # not chosen for another fault while throttled
                    throttles[pid] = throttle.start(pid, 0.25, args.slow_seconds)
                    pending.append((t + args.slow_seconds + 1, "unslow", pid))
                elif kind == "head":
                    pid = c.leader()
                    if pid is None:
                        kind = "head-unknown"  # no head answers now: not counted as a fault
                    else:
                        killed_at = time.time()
                        c.heads[pid].kill()
                        c.heads[pid].wait()
                        try:
                            os.remove(f"{c.run_dir}/{pid}/head.endpoint")
                        except FileNotFoundError:
                            pass
                        head_down = (pid, killed_at, None)
                        pending.append((t + args.rejoin_after, "head", pid))
                elif kind == "cpu":
                    hogs.extend(subprocess.Popen([sys.executable, "-c", "while True: pass"])
                                for _ in range(os.cpu_count() or 2))
                    pending.append((t + args.hog_seconds, "unhog", None))
                    pid = None
                elif kind == "leave":
                    # The process's current node: one that registered again has a newer id.
                    nodes = [n for n, p in obs["pid_of_node"].items() if p == pid]
                    left = nodes and subprocess.run([args.atoll, "leave", str(max(nodes)), "--head", c.endpoint],
                                                    capture_output=True).returncode == 0
                    if left:
                        pending.append((t + args.rejoin_after, "join", None))
                    else:
                        kind = "leave-refused"  # not counted as a fault
                else:
                    pid = c.join()
                    obs["joins"][pid] = c.now()
                if kind not in ("leave-refused", "head-unknown"):
                    obs["faults"].append({"time": t, "kind": kind, "pid": pid})
        time.sleep(1.0)  # each poll starts three atollctl processes: keep the cores for training
    for hog in hogs:
        hog.kill()
    for throttler in throttles.values():
        throttler.terminate()  # it resumes its node
        throttler.wait()
    obs["finished"] = bool(status and status.get("state") == "finished")
    obs["fragments"] = c.ctl("fragments") or []
    obs["status"] = c.ctl("status") or {}
    obs["injected"] = sorted(injected)
    obs["wall_s"] = c.now()
    c.stop()
    obs["stored"] = stored_rounds(args.atoll, run_dir, c.etcd.url() if c.etcd else None)
    if c.etcd:
        c.etcd.stop()
    return read_lines(os.path.join(run_dir, "metrics.jsonl")), obs


def stored_rounds(atoll, run_dir, registry=None):
    """Every round in every keeper's store under the run dir (the head's and each node's
    replicas, the dead nodes' included): [{fragment, round, digest, stores}]. `registry`:
    etcd's URL when heads fail over (the run's config is there)."""
    argv = [atoll, "export", "--run-dir", run_dir, "--list", "--json"] + (["--registry", registry] if registry else [])
    out = subprocess.run(argv, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"chaos: atoll export --list failed: {out.stderr.strip()}", file=sys.stderr)
        return []
    return json.loads(out.stdout)


def final_val_loss(lines, obs):
    evals = [l for l in lines if l["type"] == "eval"]
    if evals:
        return max(evals, key=lambda l: (l["step"], l["time"]))["val_loss"]
    return obs["status"].get("last_eval", {}).get("val_loss")


def evaluate(lines, obs):
    """The figures of summary.json for one run."""
    for l in lines:  # on the bench's clock: with heads that fail over, each head's metrics start anew
        if "unix_s" in l:
            l["time"] = l["unix_s"] - obs["unix_t0"] - obs["metrics_t0"]
    released = {(l["fragment"], l["round"]): l for l in lines if l["type"] == "round"}
    violations = []
    for l in lines:  # S1 per round: every ack (and every state adopted) carries the released digest
        if l["type"] in ("ack", "adopted"):
            r = released.get((l["fragment"], l["round"]))
            if r and r["digest"] != l["digest"]:
                violations.append(f"S1: {l.get('worker')} acked fragment {l['fragment']} round {l['round']} "
                                  f"with {l['digest']}, released {r['digest']}")
    if obs["regressions"]:
        violations.append(f"S3: the keeper's round went back {obs['regressions']} time(s)")
    keeper_latest = {}
    stored = {}  # (fragment, round) -> digests any keeper holds for it
    copies = {}  # (fragment, round) -> how many keepers' stores hold it
    for c in obs["stored"]:
        key = (c["fragment"], c["round"])
        keeper_latest[c["fragment"]] = max(keeper_latest.get(c["fragment"], 0), c["round"])
        stored.setdefault(key, set()).add(c["digest"])
        copies[key] = copies.get(key, 0) + len(c["stores"])
    lost = [k for k in released if k not in stored]
    single = [k for k in released if copies.get(k, 0) == 1]
    for k, digests in stored.items():
        if k in released and digests != {released[k]["digest"]}:
            violations.append(f"S4: fragment {k[0]} round {k[1]} is stored as {sorted(digests)}, "
                              f"released {released[k]['digest']}")
    for f in obs["fragments"]:  # S1 at the end
        for w in f["workers"]:
            if w["round"] == f["round"] and w["digest"] != f.get("keeper_digest"):
                violations.append(f"S1: {w['id']} ends with {w['digest']}, keeper {f.get('keeper_digest')}")
    if not obs["finished"]:
        violations.append("L1: the run did not finish")
    times = sorted(l["time"] for l in released.values())
    stalls = [b - a for a, b in zip(times, times[1:])]
    # A process can be several nodes in turn (a stopped node registers again), so a pid
    # means the newest node it was at a given time.
    def node_at(pid, when):
        nodes = [n for n, p in obs["pid_of_node"].items() if p == pid and obs["node_seen"].get(n, 0) <= when]
        return max(nodes) if nodes else None

    # Detection: from a kill or stop to the registry's "dead", at the time the head's
    # metrics give (its own clock, on the bench's from metrics_t0), else the poll's.
    deaths = dict(obs["deaths"])
    for l in lines:
        if l["type"] == "member" and l.get("state") == "dead":
            deaths[l["node"]] = l["time"] + obs["metrics_t0"]
    detect, detect_by_kind = [], {"kill": [], "stop": []}
    for f in obs["faults"]:
        node = node_at(f["pid"], f["time"]) if f["kind"] in ("kill", "stop") else None
        if node in deaths:
            detect.append(deaths[node] - f["time"])
            detect_by_kind[f["kind"]].append(deaths[node] - f["time"])
    false_evictions = [n for n, _ in deaths.items() if obs["pid_of_node"].get(n) not in obs["injected"]]
    # Joiners: from `atoll join` to the first round their worker took part in.
    productive = []
    head_to_bench = obs["metrics_t0"]  # metrics times count from the head's registry's start
    for pid, started in obs["joins"].items():
        nodes = [n for n, p in obs["pid_of_node"].items() if p == pid]
        if not nodes:
            continue
        node = min(nodes)  # the node it joined as
        worker = f"worker/{node}.0"
        first = min((l["time"] for l in released.values() if worker in l.get("workers", [])), default=None)
        if first is not None:
            productive.append(first + head_to_bench - started)
    return {
        "rounds_committed": len(released),
        "rounds_lost": len(lost),
        "rounds_on_one_disk": len(single),  # S4 wants two while two machines can keep
        "invariant_violations": len(violations),
        "violations": violations[:20],
        "max_stall_s": round(max(stalls, default=0.0), 2),
        "detect_s_median": round(statistics.median(detect), 2) if detect else None,
        "detect_s_max": round(max(detect), 2) if detect else None,
        **{f"detect_{k}_s_{stat}": (round(fn(v), 2) if v else None) for k, v in detect_by_kind.items()
           for stat, fn in (("median", statistics.median), ("max", max))},
        "join_productive_s_median": round(statistics.median(productive), 2) if productive else None,
        "join_productive_s_max": round(max(productive), 2) if productive else None,
        "false_evictions": len(false_evictions),
        "takeover_s_median": round(statistics.median(obs["takeovers"]), 2) if obs["takeovers"] else None,
        "takeover_s_max": round(max(obs["takeovers"]), 2) if obs["takeovers"] else None,
        "faults_injected": len(obs["faults"]),
        "faults_by_kind": {k: sum(1 for f in obs["faults"] if f["kind"] == k)
                           for k in ("kill", "stop", "leave", "join", "cpu", "head", "slow")},
        "val_loss": final_val_loss(lines, obs),
        "keeper_latest": keeper_latest,
        "finished": obs["finished"],
        "wall_s": round(obs["wall_s"], 1),
    }


def plot(obs, out):
    plt = pyplot_or_none("chaos", "timeline.png")
    if plt is None:
        return
    t = [p[0] for p in obs["polls"]]
    fig, ax = plt.subplots(figsize=(10, 4))
    ax.plot(t, [p[2] for p in obs["polls"]], label="committed round", color="tab:blue")
    ax.set_xlabel("seconds")
    ax.set_ylabel("round")
    ax2 = ax.twinx()
    ax2.step(t, [p[1] for p in obs["polls"]], where="post", label="active members", color="tab:green")
    ax2.set_ylabel("active members")
    ax2.set_ylim(0, max([p[1] for p in obs["polls"]] + [1]) + 1)
    colors = {"kill": "red", "stop": "orange", "leave": "purple", "join": "gray", "cpu": "green", "head": "black",
              "slow": "brown"}
    for f in obs["faults"]:
        ax.axvline(f["time"], color=colors[f["kind"]], alpha=0.5, linestyle="--")
    for kind, color in colors.items():
        ax.plot([], [], color=color, linestyle="--", label=kind)
    lines1, labels1 = ax.get_legend_handles_labels()
    lines2, labels2 = ax2.get_legend_handles_labels()
    ax.legend(lines1 + lines2, labels1 + labels2, loc="upper left", fontsize=8)
    ax.set_title("chaos run: rounds, members and faults")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def markdown(summary):
    """The run's figures against its fault-free twin, from summary.json (tools/bench/report.py chaos DIR)."""
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(summary.get("faults_by_kind", {}).items()) if n)
    fmt = lambda v: "-" if v is None else v
    loss = lambda v: "-" if v is None else f"{v:.4f}"
    rows = [("faults injected", f"{summary['faults_injected']} ({kinds})"),
            ("rounds committed", summary["rounds_committed"]),
            ("rounds lost", summary["rounds_lost"]),
            ("rounds on one disk only", summary.get("rounds_on_one_disk", "-")),
            ("invariant violations", summary["invariant_violations"]),
            ("false evictions", summary["false_evictions"]),
            ("failure detected, s: median (max)", f"{fmt(summary['detect_s_median'])} ({fmt(summary['detect_s_max'])})"),
            ("a joiner productive, s: median (max)",
             f"{fmt(summary['join_productive_s_median'])} ({fmt(summary['join_productive_s_max'])})"),
            ("longest stall, s", summary["max_stall_s"]),
            ("held-out loss: chaos, fault-free", f"{loss(summary['val_loss'])}, {loss(summary.get('val_loss_fault_free'))}")]
    if summary.get("takeover_s_median") is not None:
        rows.append(("a head's takeover, s: median (max)", f"{summary['takeover_s_median']} ({summary['takeover_s_max']})"))
    return "\n".join(["| figure | value |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--atollctl", required=True)
    ap.add_argument("--minutes", type=float, default=10, help="rough length of both runs together")
    ap.add_argument("--every", type=float, default=20, help="seconds between faults (jittered 0.5x to 1.5x)")
    ap.add_argument("--rejoin-after", type=float, default=5, help="seconds before a killed or drained node is replaced")
    ap.add_argument("--max-nodes", type=int, default=4)
    ap.add_argument("--hog-seconds", type=float, default=10, help="how long a cpu fault saturates the CPU")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--steps", type=int, default=0, help="inner steps per worker (default: from --minutes)")
    ap.add_argument("--keepers", choices=["nodes", "head"], default="nodes",
                    help="storage.keepers for both runs: the head's keeper and a replica, or two replicas on nodes")
    ap.add_argument("--heads", type=int, choices=[1, 2], default=1,
                    help="2: two heads that fail over on a three-member etcd started here, and the head fault")
    ap.add_argument("--shards", default="auto",
                    help="diloco.shards: each fragment's round in S slices, each with its own coordinator on its own "
                         "node, so that the faults hit slice hosts too (default auto: the head chooses, as in any run; "
                         "1: one coordinator a fragment)")
    ap.add_argument("--slow", action="store_true",
                    help="add the slow fault: a node throttled to a quarter of its speed for --slow-seconds")
    ap.add_argument("--slow-seconds", type=float, default=20)
    ap.add_argument("--round-close", choices=["all", "adaptive"], default="all", help="diloco.round_close of both runs")
    ap.add_argument("--out", default="build/bench/chaos")
    args = ap.parse_args()
    if args.minutes <= 0 or args.every <= 0 or args.max_nodes < 3:
        ap.error("--minutes and --every must be positive, --max-nodes at least 3")
    if args.shards != "auto" and not args.shards.isdigit():
        ap.error(f"--shards takes a number or auto, not {args.shards!r}")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "chaos")  # run.json: command, date, machine, revision
    # About 700 steps a minute per worker for this model on 2 cores; the chaos run is the
    # longer of the two, so it gets about two thirds of the time.
    steps = args.steps or max(200, int(args.minutes * 280) // 20 * 20)
    print(f"chaos: {steps} steps per worker, a fault every ~{args.every:g} s; output in {args.out}", flush=True)
    base_lines, base_obs = run(args, "fault-free", steps, chaos=False)
    base = evaluate(base_lines, base_obs)
    print(f"chaos: fault-free run: {base['rounds_committed']} rounds, val loss {base['val_loss']}, "
          f"{base['wall_s']} s", flush=True)
    lines, obs = run(args, "chaos", steps, chaos=True)
    with open(os.path.join(args.out, "observations.json"), "w") as f:
        json.dump(obs, f, indent=1, default=str)
    summary = evaluate(lines, obs)
    summary["val_loss_fault_free"] = base["val_loss"]
    summary["fault_free"] = base
    summary["steps"] = steps
    summary["seed"] = args.seed
    summary["keepers"] = args.keepers
    summary["heads"] = args.heads
    summary["shards"] = args.shards
    summary["round_close"] = args.round_close
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=2)
    plot(obs, os.path.join(args.out, "timeline.png"))
    print(json.dumps({k: v for k, v in summary.items() if k not in ("fault_free", "violations")}, indent=2))
    for v in summary["violations"]:
        print("VIOLATION:", v)
    return 1 if summary["invariant_violations"] or summary["rounds_lost"] else 0


if __name__ == "__main__":
    sys.exit(main())
