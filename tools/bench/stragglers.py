#!/usr/bin/env python3
"""Stragglers benchmark (issue 46): goodput of four workers of mixed speed.

Four `atoll join` nodes and a head on this machine train the default example (the chaos
bench's smaller GPT: 2 blocks, width 64). Two nodes are throttled, one to half and one to a
quarter of their speed (SIGSTOP/SIGCONT on a 60 ms duty cycle, tools/bench/benchlib/throttle.py;
the nodes hosting no coordinator are chosen; the keeper is the head's, so no commit waits on
a throttled node). Rows:
  bound          throttled, no sync at all: the samples per second the four reach side by
                 side (every sample counts); run first and again last (bound-after), and
                 every row is compared with the mean of the two
  wait-for-all   throttled, phases of H steps, rounds wait for every participant (plain
                 DiLoCo, the default before time-boxed phases)
  adaptive       the same with diloco.round_close = adaptive (the slow are left out and resync)
  time-boxed     throttled, diloco.sync_every_s: a round every --round-s seconds, every worker
                 contributes what it trained (weighted by its samples); rounds wait for all
  time-boxed-adaptive   the same with diloco.round_close = adaptive
  homogeneous    time-boxed, no throttle
  homogeneous-equal-samples   time-boxed, no throttle, run until the samples time-boxed trained:
                 the held-out loss to compare at equal samples
  time-boxed-kills   time-boxed, throttled, and a node SIGKILLed every --kill-every seconds
                 (jittered 0.5x to 1.5x; never the coordinator's host; a replacement with the
                 victim's throttle joins 5 s later; no kill in the last fifth of the run)
  ddp-kills      the data-parallel baseline (run.mode = ddp: gradients averaged every step)
                 under the same throttles and kills, for as many steps as its slowest worker
                 takes in --seconds; its samples are each round's contributions x a step's
  ddp            the same without kills
Kill rows use a 4 s lease (heartbeats every 500 ms), so a dead node leaves its rounds soon.
Goodput counts the samples (tokens, for this example) of contributions that reached a
committed round (the round lines' weights: diloco.weighting = samples), per second of the
workers' training (the longest worker's wall time). Every row overlaps a quarter of a
round's phase (diloco.overlap), so a round's latency is not time blocked. Time-boxed rows run --seconds of
training; step rows run the steps that take a full-speed worker about --seconds (wait-for-
all then takes longer: it is slower).

A row whose committed samples pass its trained samples (2% for the estimate's rounding), or
whose goodput passes the higher of the two bounds by a quarter, fails the bench (exit 1).

Writes OUT/results.json: a list of rows with name, goodput_samples_s, bound_samples_s,
samples (committed), trained (all trained), held_out_loss, wall_s, rounds, and per worker
its tokens. Usage:
  tools/bench/stragglers.py --atoll build/tools/atoll --atollctl build/tools/atollctl
                            [--seconds 60] [--round-s 5] [--rows a,b] [--kill-every 15] [--out DIR]
"""
import argparse
import json
import os
import random
import shutil
import sys
import time

from benchlib import cluster, provenance, throttle  # tools/bench/benchlib, next to this script
from benchlib.metrics import read_lines

# run.min_workers = 3: training starts with three of the four (they start together), and a
# round may close without one of them (the quorum is 3 of 4), not without two.
MODEL = ["--set", "model.layers=2", "--set", "model.width=64", "--set", "run.min_workers=3",
         "--set", "storage.keepers=head", "--set", "storage.keep_rounds=100000"]
SHARES = [1.0, 1.0, 0.5, 0.25]  # each node's speed; the throttled ones host no coordinator
TICK_S = 0.05  # time-boxed rows: the schedule's step
ROWS = ["bound", "wait-for-all", "adaptive", "time-boxed", "time-boxed-adaptive", "homogeneous",
        "homogeneous-equal-samples", "time-boxed-kills", "ddp", "ddp-kills"]
TOKENS_PER_STEP = 32 * 64  # inner.batch_size x model.context
FAST_LEASE = ["--set", "cluster.heartbeat_ms=500", "--set", "cluster.lease_ms=4000"]


def run(args, name, settings, throttled, kill_every=0):
    """One run to its end; returns its metrics lines (and, with kills, how many)."""
    run_dir = os.path.join(args.out, name)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(f"{run_dir}/logs")
    metrics = f"{run_dir}/metrics.jsonl"
    logs = [0]

    def join():
        logs[0] += 1
        return cluster.join(args.atoll, endpoint, f"{run_dir}/logs/node{logs[0]}.log", ["--threads", "1"])
    head, endpoint = cluster.start_head(args.atoll, run_dir, ["--metrics", metrics] + MODEL + settings)
    nodes = [join() for _ in range(4)]
    throttles = {}  # pid -> (share, throttling process)
    kills = 0
    try:
        hosts = training_started(args, endpoint)
        if throttled:
            throttles = throttle_nodes(args, endpoint, hosts)
        rng = random.Random(args.seed)
        start = time.monotonic()
        next_kill = start + kill_every * rng.uniform(0.5, 1.5)
        joins = []  # (when, share) of replacements to come
        while time.monotonic() < start + 20 * args.seconds:
            now = time.monotonic()
            if kill_every and now >= next_kill and now - start < 0.8 * args.seconds:
                next_kill = now + kill_every * rng.uniform(0.5, 1.5)
                alive = [n for n in nodes if n.poll() is None and n.pid not in hosts]
                if alive:
                    victim = rng.choice(alive)
                    share, throttler = throttles.pop(victim.pid, (1.0, None))
                    if throttler:
                        throttler.terminate()
                        throttler.wait()
                    victim.kill()
                    victim.wait()
                    kills += 1
                    joins.append((now + 5, share))
            for when, share in [j for j in joins if j[0] <= now]:
                joins.remove((when, share))
                node = join()
                nodes.append(node)
                if share < 1:
                    throttles[node.pid] = (share, throttle.start(node.pid, share, 100 * args.seconds))
            if not joins and all(n.poll() is not None for n in nodes):
                break
            time.sleep(0.5)
    finally:
        for _, t in throttles.values():
            t.terminate()
            t.wait()
        cluster.stop(args.atoll, endpoint, nodes + [head])
    return read_lines(metrics) + [{"type": "kills", "kills": kills}]


def training_started(args, endpoint):
    """Waits until training started with four members; the pids hosting a coordinator."""
    for _ in range(600):
        status = cluster.ctl(args.atollctl, endpoint, "status") or {}
        actors = cluster.ctl(args.atollctl, endpoint, "actors") or []
        members = cluster.ctl(args.atollctl, endpoint, "members") or []
        hosts = {a["process"] for a in actors if a["id"].startswith("coord/")}
        if status.get("state") == "training" and hosts and len(members) == 4:
            break
        time.sleep(0.1)
    return {m["pid"] for m in members if f"node/{m['node_id']}" in hosts}


def throttle_nodes(args, endpoint, hosts):
    """Throttles the nodes hosting no coordinator to SHARES: pid -> (share, throttler)."""
    members = cluster.ctl(args.atollctl, endpoint, "members") or []
    free = sorted(m["pid"] for m in members if m["pid"] not in hosts)
    slow = [s for s in SHARES if s < 1]
    return {pid: (share, throttle.start(pid, share, 100 * args.seconds)) for pid, share in zip(free, slow)}


def fragment_rounds(lines):
    """The round lines, one per fragment round: with sharded rounds each slice writes a line of
    its own with the same workers and weights (`slice`, `shards`), so only slice 0's count. Until
    2026-12-07 every slice's line counted: committed samples were S times what was trained."""
    return [j for j in lines if j["type"] == "round" and j.get("slice", 0) == 0]


def summarise(name, lines, ddp=False):
    rounds = fragment_rounds(lines)
    kills = next((j["kills"] for j in lines if j["type"] == "kills"), 0)
    done = [j for j in lines if j["type"] == "worker_done"]
    summary = next((j for j in lines if j["type"] == "summary"), {})
    wall = max((d["wall_s"] for d in done), default=0)
    # Late work (diloco.late_work = keep) is averaged at half its weight: its samples are twice that.
    committed = sum(sum(r.get("weights", [])) + 2 * sum(r.get("late", {}).values()) for r in rounds)
    if ddp:  # every contribution is one step (its weight is 1)
        committed = sum(len(r["workers"]) for r in rounds) * TOKENS_PER_STEP
    trained = {d["worker"]: round(d["tokens_per_s"] * d["wall_s"]) for d in done}
    # A killed worker sends no worker_done: its samples are its last reported step's (until
    # 2026-12-07 they were left out, and kill rows committed more than they "trained").
    last_step = {}
    for j in lines:
        if j["type"] == "step":
            last_step[j["worker"]] = max(last_step.get(j["worker"], 0), j["step"])
    for worker, step in last_step.items():
        trained.setdefault(worker, step * TOKENS_PER_STEP)
    return {"name": name, "wall_s": round(wall, 1), "rounds": len(rounds), "samples": round(committed),
            "trained": sum(trained.values()), "trained_by_worker": trained,
            "goodput_samples_s": round(committed / wall, 1) if wall else 0,
            "held_out_loss": summary.get("val_loss"), "kills": kills}


def check_row(row, bound_max):
    """The invariants the figures rest on; a row that breaks one fails the bench, unwritten."""
    bad = []
    if row["samples"] > 1.02 * row["trained"]:  # trained is tokens/s x wall: 2% for its rounding
        bad.append(f"committed {row['samples']} samples of {row['trained']} trained")
    # Only rows measured against the bound (throttled ones; not the bound's own, nor the
    # unthrottled homogeneous rows). The bound drifts with the machine between its two runs
    # (up to 25% seen): a quarter over the higher of them, where a count per slice is 2x or more.
    if bound_max and row.get("bound_samples_s") and not row["name"].startswith("bound") \
            and row["goodput_samples_s"] > 1.25 * bound_max:
        bad.append(f"goodput {row['goodput_samples_s']} above the bound ({bound_max}, the higher of its two runs)")
    for key in ("wall_s", "samples", "trained", "goodput_samples_s"):
        if not isinstance(row.get(key), (int, float)) or row[key] < 0:
            bad.append(f"{key} {row.get(key)}")
    if row["name"] != "bound" and row["wall_s"] <= 0:
        bad.append("no worker finished")
    if bad:
        sys.exit(f"stragglers: row {row['name']} is not valid: {'; '.join(bad)}")


def main():
    ap = argparse.ArgumentParser(description="goodput of four workers of mixed speed")
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--atollctl", required=True)
    ap.add_argument("--seconds", type=float, default=60, help="training time of a time-boxed row")
    ap.add_argument("--round-s", type=float, default=5, help="diloco.sync_every_s of the time-boxed rows")
    ap.add_argument("--rows", default=",".join(ROWS), help="which rows, comma-separated (bound always runs)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--kill-every", type=float, default=15, help="seconds between kills in the kill rows")
    ap.add_argument("--out", default="build/bench/stragglers")
    args = ap.parse_args()
    rows = [r for r in args.rows.split(",") if r]
    unknown = [r for r in rows if r not in ROWS]
    if unknown or args.seconds <= 0 or args.round_s < TICK_S:
        ap.error(f"unknown rows {unknown}" if unknown else "--seconds must be positive, --round-s at least 0.05")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "stragglers")  # tools/bench/report.py stragglers DIR renders the table
    ticks = int(args.seconds / TICK_S)
    per_round = max(1, int(round(args.round_s / TICK_S)))
    ticks -= ticks % per_round  # the run ends on a sync point: its last samples count
    common = ["--set", f"run.seed={args.seed}"]

    def time_boxed(sync_ticks, close="all", steps=ticks):
        return common + ["--set", f"run.steps={steps}", "--set", f"diloco.sync_every={sync_ticks}", "--set",
                         f"diloco.sync_every_s={sync_ticks * TICK_S}", "--set", f"diloco.round_close={close}",
                         "--set", f"run.eval_every={steps}", "--set", f"diloco.overlap={sync_ticks // 4}"]

    results = []

    def record(row):
        results.append(row)
        print(f"stragglers: {row['name']}: goodput {row['goodput_samples_s']} samples/s over {row['wall_s']} s, "
              f"{row['rounds']} rounds, held-out loss {row['held_out_loss']}", flush=True)
        with open(os.path.join(args.out, "results.json"), "w") as f:
            json.dump(results, f, indent=2)

    # The bound: throttled, no sync (phases longer than the run), every sample counts.
    bound = summarise("bound", run(args, "bound", time_boxed(10 * ticks), throttled=True))
    bound["goodput_samples_s"] = round(bound["trained"] / bound["wall_s"], 1) if bound["wall_s"] else 0
    bound["samples"] = bound["trained"]
    bound_rate = bound["goodput_samples_s"]
    record(dict(bound, bound_samples_s=bound_rate))
    # Step rows: H = the steps a full-speed worker takes in --round-s, a run as long as a
    # full-speed worker's --seconds (measured in the bound row: its fastest worker).
    fastest = max(bound["trained_by_worker"].values()) / bound["wall_s"] / TOKENS_PER_STEP
    slowest = min(bound["trained_by_worker"].values()) / bound["wall_s"] / TOKENS_PER_STEP
    h = max(1, int(fastest * args.round_s))
    steps = max(h, int(fastest * args.seconds) // h * h)
    step_rows = {"wait-for-all": "all", "adaptive": "adaptive"}
    for name in rows:
        if name in step_rows:
            settings = common + ["--set", f"run.steps={steps}", "--set", f"diloco.sync_every={h}", "--set",
                                 f"diloco.round_close={step_rows[name]}", "--set", f"run.eval_every={steps}",
                                 "--set", f"diloco.overlap={h // 4}"]
            record(dict(summarise(name, run(args, name, settings, throttled=True)), bound_samples_s=bound_rate))
        elif name in ("time-boxed", "time-boxed-adaptive"):
            close = "adaptive" if name.endswith("adaptive") else "all"
            record(dict(summarise(name, run(args, name, time_boxed(per_round, close), throttled=True)),
                        bound_samples_s=bound_rate))
        elif name == "time-boxed-kills":
            record(dict(summarise(name, run(args, name, time_boxed(per_round) + FAST_LEASE, throttled=True,
                                            kill_every=args.kill_every)), bound_samples_s=bound_rate))
        elif name in ("ddp", "ddp-kills"):
            ddp_steps = max(10, int(slowest * args.seconds))
            settings = common + FAST_LEASE + ["--set", "run.mode=ddp", "--set", f"run.steps={ddp_steps}",
                                              "--set", f"run.eval_every={ddp_steps}"]
            kill_every = args.kill_every if name == "ddp-kills" else 0
            record(dict(summarise(name, run(args, name, settings, throttled=True, kill_every=kill_every), ddp=True),
                        bound_samples_s=bound_rate))
        elif name == "homogeneous":
            record(dict(summarise(name, run(args, name, time_boxed(per_round), throttled=False)),
                        bound_samples_s=None))
    # The bound again, last: the machine's drift over the rows shows in the two, and their
    # mean is what every row's goodput is compared with.
    after = summarise("bound-after", run(args, "bound-after", time_boxed(10 * ticks), throttled=True))
    after["goodput_samples_s"] = round(after["trained"] / after["wall_s"], 1) if after["wall_s"] else 0
    after["samples"] = after["trained"]
    bound_rate = round((bound["goodput_samples_s"] + after["goodput_samples_s"]) / 2, 1)
    for row in results:
        if row["bound_samples_s"] is not None:
            row["bound_samples_s"] = bound_rate
    record(dict(after, bound_samples_s=bound_rate))
    if "homogeneous-equal-samples" in rows:
        boxed = next((r for r in results if r["name"] == "time-boxed"), None)
        homo = next((r for r in results if r["name"] == "homogeneous"), None)
        if boxed and homo and homo["trained"]:
            equal = int(ticks * boxed["trained"] / homo["trained"])
            equal = max(per_round, equal - equal % per_round)
            row = summarise("homogeneous-equal-samples",
                            run(args, "homogeneous-equal-samples", time_boxed(per_round, steps=equal), throttled=False))
            record(dict(row, bound_samples_s=None))
        else:
            print("stragglers: homogeneous-equal-samples needs the time-boxed and homogeneous rows", file=sys.stderr)
    bound_max = max(bound["goodput_samples_s"], after["goodput_samples_s"])
    for row in results:
        check_row(row, bound_max)


if __name__ == "__main__":
    main()
