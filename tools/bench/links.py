#!/usr/bin/env python3
"""Training over shaped links: a head and 4 nodes, each in its own network namespace.

Every process gets a namespace (atl-head, atl-n1..atl-n4; tools/bench/benchlib/netns.py) joined by
veth pairs to one bridge, all on this machine. With --mbit R (default 100) each node's link is
shaped with `tc tbf` to R Mbit/s in both directions. No delay is added (netem is not available
on these kernels): this measures bandwidth, not latency.

Runs data-parallel, DiLoCo (through one coordinator, and in 4 slices: diloco-sharded), the
best dense Streaming configuration (also in 4 slices: streaming-overlap-int8-ef-sharded) and the
best sparse one (topk16), each shaped and
unshaped (the twin), with CURVE keys and each node
listening (tensors go node to node). Every
node gets a run dir and the runs use storage.keepers = nodes (the default): the commits go
to two keeper replicas on nodes, not to the head's keeper. `--keepers head` gives the
nodes no run dir, so every commit goes to the head's keeper.
Model: the default GPT (0.83M parameters, 3.3 MB fp32) with 8 sequences per step, so that
a step computes faster than one fp32 copy of the model crosses a 100 Mbit/s link
(0.27 s): data-parallel is then link-bound there.

Writes DIR/summary.json {"runs": [{name, mode, fragments, codec, link_mbit, wall_s,
compute_utilisation, val_loss, bytes_sent_per_worker, bytes_received_per_worker,
head_link_bytes, head_tensor_bytes, head_link_by_kind, keepers}], ...} and DIR/links.png, each node's link throughput over time in the
shaped runs. Needs root (namespaces, tc): exits 2 with a message otherwise.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time

from benchlib import netns, provenance  # tools/bench/benchlib, next to this script
from benchlib.netns import HEAD_IP, link_bytes, sh

NODES = 4
NAMESPACES = netns.names(NODES)

COMMON = ["--set", "run.example=shakespeare", "--set", "inner.batch_size=8", "--set", f"run.min_workers={NODES}",
          "--set", "cluster.lease_ms=60000"]
H = ["--set", "diloco.sync_every=20"]
STAR = ["--set", "diloco.shards=1"]  # one coordinator a fragment; the default (auto) is 4 slices here
STREAMING_INT8 = H + ["--set", "diloco.fragments=3", "--set", "diloco.codec=int8", "--set", "diloco.overlap=5", "--set",
                      "diloco.alpha=0.5", "--set", "diloco.error_feedback=true"]
RUNS = [
    ("ddp", ["--set", "run.mode=ddp"], "ddp", 1, "fp32"),
    ("diloco", H + STAR, "diloco", 1, "fp32"),
    # The same with the default diloco.shards = auto: each round reduced in 4 slices (one
    # coordinator on each node) instead of through one coordinator.
    ("diloco-sharded", H, "diloco", 1, "fp32"),
    ("streaming-overlap-int8-ef", STREAMING_INT8 + STAR, "diloco", 3, "int8"),
    # The same with the default: each fragment's round reduced in 4 slices.
    ("streaming-overlap-int8-ef-sharded", STREAMING_INT8, "diloco", 3, "int8"),
    # The sparse codec's best row of the quality bench (tools/bench/quality.py: no outer
    # momentum, alpha = 0).
    ("streaming-overlap-topk16-ef", H + ["--set", "diloco.fragments=3", "--set", "diloco.codec=topk16", "--set",
                                         "diloco.overlap=5", "--set", "diloco.alpha=0", "--set",
                                         "diloco.error_feedback=true", "--set", "diloco.outer_momentum=0", "--set",
                                         "diloco.outer_lr=1.0"], "diloco", 3, "topk16"),
]


class sampler(threading.Thread):
    """Each node's link bytes (both directions) every 0.5 s."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples, self.stop = [], threading.Event()

    def run(self):
        start = time.time()
        while not self.stop.is_set():
            self.samples.append((time.time() - start, {ns: link_bytes(ns) for ns in NAMESPACES}))
            time.sleep(0.5)


def run_one(atoll, keys, out, name, extra, steps, mbit, keepers):
    run_dir = os.path.join(out, f"{name}-{mbit or 'unshaped'}")
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    netns.shape(NODES, mbit)
    head_ep = f"tcp://{HEAD_IP}:7070"
    metrics = os.path.join(run_dir, "metrics.jsonl")
    logs = []

    def start(ns, args, log):
        f = open(os.path.join(run_dir, log), "w")
        logs.append(f)
        return subprocess.Popen(["ip", "netns", "exec", ns, atoll] + args, stdout=f, stderr=subprocess.STDOUT)

    head = start("atl-head", ["up", "--listen", head_ep, "--run-dir", os.path.join(run_dir, "head"), "--keys", keys,
                              "--metrics", metrics, "--set", f"run.steps={steps}", "--set",
                              f"run.eval_every={steps // 2}", "--set", f"storage.keepers={keepers}"]
                 + COMMON + extra, "head.log")
    time.sleep(1.0)
    watch = sampler()
    watch.start()
    # Keepers on nodes need nodes that can keep: a run dir each.
    node_dirs = {ns: ["--run-dir", os.path.join(run_dir, ns)] if keepers == "nodes" else [] for ns in NAMESPACES[1:]}
    nodes = [start(ns, ["join", "--head", head_ep, "--keys", keys, "--threads", "1"] + node_dirs[ns], f"{ns}.log")
             for ns in NAMESPACES[1:]]
    codes = [n.wait(timeout=3600) for n in nodes]
    watch.stop.set()
    sh("ip", "netns", "exec", "atl-head", atoll, "down", "--head", head_ep, "--keys", keys, check=False)
    head.wait(timeout=60)
    for f in logs:
        f.close()
    if any(codes):
        sys.exit(f"links: {name} at {mbit} Mbit/s: a node failed ({codes}); logs in {run_dir}")
    lines = [json.loads(l) for l in open(metrics) if l.strip()]
    done = [l for l in lines if l["type"] == "worker_done"]
    summary = [l for l in lines if l["type"] == "summary"][-1]
    return {"wall_s": summary["wall_s"], "val_loss": summary["val_loss"],
            "compute_utilisation": sum(d.get("compute_utilisation", 0.0) for d in done) / len(done),
            "bytes_sent_per_worker": sum(d["bytes_sent"] for d in done) / len(done),
            "bytes_received_per_worker": sum(d["bytes_received"] for d in done) / len(done),
            "head_link_bytes": summary.get("head_link_bytes", 0),
            "head_tensor_bytes": summary.get("head_tensor_bytes", 0),
            "head_relayed_tensor_bytes": summary.get("head_relayed_tensor_bytes", 0),
            "head_link_by_kind": summary.get("head_link_by_kind", {}), "keepers": keepers}, watch.samples


def plot(traces, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("links: matplotlib missing; no plot")
        return
    fig, axes = plt.subplots(len(traces), 1, figsize=(9, 3 * len(traces)), squeeze=False)
    for ax, (name, samples) in zip(axes[:, 0], traces.items()):
        for ns in NAMESPACES:
            xs, ys = [], []
            for (t0, b0), (t1, b1) in zip(samples, samples[1:]):
                xs.append(t1)
                ys.append((b1[ns] - b0[ns]) * 8 / (t1 - t0) / 1e6)
            ax.plot(xs, ys, label=ns, linewidth=0.8)
        ax.set_title(name)
        ax.set_xlabel("s")
        ax.set_ylabel("Mbit/s (in + out)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def markdown(summary):
    """Each run shaped and unshaped, from summary.json (tools/bench/report.py links DIR)."""
    runs = summary["runs"]
    lines = ["| run | link | wall s | vs unshaped | utilisation | val loss | MB sent + received / worker | head link MB |",
             "|---|---|---|---|---|---|---|---|"]
    twin = {r["name"]: r for r in runs if r["link_mbit"] == 0}
    for r in runs:
        base = twin.get(r["name"])
        ratio = f"{r['wall_s'] / base['wall_s']:.2f}x" if base else "-"
        lines.append(f"| {r['name']} | {r['link_mbit'] or 'unshaped'} | {r['wall_s']:.1f} | {ratio} | "
                     f"{r['compute_utilisation']:.3f} | {r['val_loss']:.4f} | "
                     f"{(r['bytes_sent_per_worker'] + r['bytes_received_per_worker']) / 1e6:.1f} | "
                     f"{r['head_link_bytes'] / 1e6:.1f} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--mbit", type=int, default=100)
    ap.add_argument("--only", default="", help="comma-separated run names")
    ap.add_argument("--keepers", choices=["nodes", "head"], default="nodes",
                    help="storage.keepers: the head's keeper, or two replicas on nodes (each node gets a run dir)")
    args = ap.parse_args()
    netns.require_root("links")
    netns.setup_or_exit("links", NODES)
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "links")  # run.json: command, date, machine, revision
    atoll = os.path.abspath(args.atoll)
    keys = os.path.join(os.path.abspath(args.out), "keys")
    shutil.rmtree(keys, ignore_errors=True)
    sh(atoll, "keygen", "--out", keys)
    runs, traces = [], {}
    try:
        for name, extra, mode, fragments, codec in RUNS:
            if args.only and name not in args.only.split(","):
                continue
            for mbit in (args.mbit, 0):
                r, samples = run_one(atoll, keys, os.path.abspath(args.out), name, extra, args.steps, mbit,
                                     args.keepers)
                r.update({"name": name, "mode": mode, "fragments": fragments, "codec": codec, "link_mbit": mbit})
                runs.append(r)
                if mbit:
                    traces[f"{name} at {mbit} Mbit/s"] = samples
                print(f"links: {name} at {mbit or 'unshaped'} Mbit/s: {r['wall_s']:.1f} s, utilisation "
                      f"{r['compute_utilisation']:.3f}, val {r['val_loss']:.4f}, "
                      f"{r['bytes_sent_per_worker'] / 1e6:.1f} MB sent + {r['bytes_received_per_worker'] / 1e6:.1f} MB "
                      f"received per worker, head link {r['head_link_bytes'] / 1e6:.1f} MB "
                      f"(tensors {r['head_tensor_bytes'] / 1e6:.1f} MB in or out, "
                      f"{r['head_relayed_tensor_bytes'] / 1e6:.1f} MB relayed between nodes)", flush=True)
                with open(os.path.join(args.out, "summary.json"), "w") as f:
                    json.dump({"runs": runs, "steps": args.steps, "nodes": NODES,
                               "model": "shakespeare GPT, 0.83M parameters, 8 sequences of 64 per step",
                               "shaping": f"tc tbf {args.mbit} Mbit/s each node's link, both ways; no added delay "
                                          "(netem unavailable)"}, f, indent=1)
    finally:
        netns.shape(NODES, 0)
        netns.teardown()
    plot(traces, os.path.join(args.out, "links.png"))
    print("\n" + markdown({"runs": runs}))

if __name__ == "__main__":
    main()
