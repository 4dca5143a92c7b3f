"""A three-member etcd on loopback (Debian's etcd-server) for the benchmarks: heads that fail
over (bench chaos --heads 2) and the registry on etcd (bench scale --registry etcd)."""
import json
import os
import subprocess
import time
import urllib.request

from benchlib.cluster import free_port

ETCD = "/usr/bin/etcd"


class Etcd:
    """Three etcd members on loopback, their data and logs (logs/etcd-*.log) under run_dir;
    url() is the registry URL a head takes (`--registry`)."""

    def __init__(self, run_dir, prefix="chaos"):
        self.prefix = prefix
        self.members = [(f"m{i}", free_port(), free_port()) for i in range(3)]
        initial = ",".join(f"{n}=http://127.0.0.1:{peer}" for n, _, peer in self.members)
        self.procs = []
        os.makedirs(f"{run_dir}/logs", exist_ok=True)
        for name, client, peer in self.members:
            log = open(f"{run_dir}/logs/etcd-{name}.log", "ab")
            self.procs.append(subprocess.Popen(
                [ETCD, "--name", name, "--data-dir", f"{run_dir}/etcd-{name}",
                 "--listen-client-urls", f"http://127.0.0.1:{client}", "--advertise-client-urls",
                 f"http://127.0.0.1:{client}", "--listen-peer-urls", f"http://127.0.0.1:{peer}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}", "--initial-cluster", initial,
                 "--initial-cluster-state", "new", "--initial-cluster-token", f"atoll-{prefix}"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
        for _ in range(300):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.members[0][1]}/health", timeout=1) as r:
                    if json.loads(r.read()).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        raise RuntimeError(f"etcd did not start; see {run_dir}/logs/etcd-m0.log")

    def url(self):
        return "etcd://" + ",".join(f"127.0.0.1:{client}" for _, client, _ in self.members) + "/" + self.prefix

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
