"""Nodes on shaped links, all on this machine: one network namespace a process (atl-head,
atl-n1..atl-nN), each joined by a veth pair to one bridge, each node's link shaped with
`tc tbf` to R Mbit/s in both directions (the node's side and the bridge's side). netem is
not available on these kernels, so no delay is added: this measures bandwidth, not latency.
Used by `bench links` and `bench averaging --mbit`. Needs root.
"""
import os
import subprocess
import sys

BRIDGE = "atl-br0"
HEAD = "atl-head"
HEAD_IP = "10.77.0.1"


def sh(*cmd, check=True):
    res = subprocess.run(list(cmd), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if check and res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {res.stdout.strip()}")
    return res


def names(nodes):
    """The head's namespace, then one per node."""
    return [HEAD] + [f"atl-n{i}" for i in range(1, nodes + 1)]


def host_side(ns):
    return ns + "-h"  # the veth end on the bridge


def teardown():
    """Removes every atl- namespace and the bridge, whatever an earlier run left."""
    listed = sh("ip", "netns", "list", check=False).stdout.split()
    for ns in sorted({n for n in listed if n.startswith("atl-")}):
        sh("ip", "link", "del", host_side(ns), check=False)
        sh("ip", "netns", "del", ns, check=False)
    sh("ip", "link", "del", BRIDGE, check=False)


def setup(nodes):
    """The head's namespace at HEAD_IP and `nodes` more at 10.77.0.2 and up."""
    teardown()
    sh("ip", "link", "add", BRIDGE, "type", "bridge")
    sh("ip", "link", "set", BRIDGE, "up")
    for i, ns in enumerate(names(nodes), start=1):
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", host_side(ns), "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "link", "set", host_side(ns), "master", BRIDGE, "up")
        sh("ip", "netns", "exec", ns, "ip", "addr", "add", f"10.77.0.{i}/24", "dev", "eth0")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "eth0", "up")
        sh("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")


def shape(nodes, mbit):
    """Each node's link at `mbit` both ways (0: unshaped). The head's link is left alone."""
    for ns in names(nodes)[1:]:
        sh("tc", "qdisc", "del", "dev", host_side(ns), "root", check=False)
        sh("ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root", check=False)
        if mbit:
            tbf = ["root", "tbf", "rate", f"{mbit}mbit", "burst", "64kb", "latency", "200ms"]
            sh("tc", "qdisc", "add", "dev", host_side(ns), *tbf)
            sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", *tbf)


def link_bytes(ns):
    """Bytes through the namespace's link so far, both directions."""
    base = f"/sys/class/net/{host_side(ns)}/statistics/"
    with open(base + "rx_bytes") as rx, open(base + "tx_bytes") as tx:
        return int(rx.read()) + int(tx.read())


def require_root(tool):
    """Exits 2 with a message when not root (namespaces and tc need it)."""
    if os.geteuid() != 0:
        print(f"{tool}: needs root to create network namespaces and shape links with tc "
              f"(run it as root, e.g. sudo ./tools/dev bench ...)", file=sys.stderr)
        sys.exit(2)


def setup_or_exit(tool, nodes):
    """setup(nodes), or exit 2 saying why not."""
    try:
        setup(nodes)
    except RuntimeError as e:
        teardown()
        print(f"{tool}: cannot create the namespaces: {e}", file=sys.stderr)
        sys.exit(2)
