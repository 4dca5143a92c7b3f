#!/usr/bin/env python3
"""Replicas trained by groups of processes (atoll.join(..., group=...), DDP over Gloo),
in real processes against a real head:

1. two replicas of two processes each (examples/python/classifier_ddp.py) join: the head
   counts two nodes with one worker each, not four;
2. a SIGKILL of one process of the second group: its leader fails where the group next
   communicates (GroupLost from diloco.step(), or the backend's error from DDP's
   backward), leaves, and the head sees that node go;
3. a new group joins (the run needs two workers), catches up from the committed state,
   and both groups train to the end: their four processes hold the same parameters, bit
   for bit, and so does `atoll export` of the run (the keepers' committed state).

Usage: python_group_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

from checks import check, last_json, text_of, wait_for
from head_endpoint import stop_all, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python")
STEPS = 3000


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    atollctl = os.path.join(os.path.dirname(atoll_bin), "atollctl")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    head_dir, head_log = os.path.join(work, "head"), os.path.join(work, "head.log")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir,
                             "--set", "run.example=external", "--set", f"run.steps={STEPS}",
                             "--set", "run.min_workers=2", "--set", "diloco.sync_every=50",
                             "--set", "diloco.fragments=3", "--set", "diloco.outer_lr=1",
                             "--set", "diloco.outer_momentum=0", "--set", "cluster.heartbeat_ms=300",
                             "--set", "cluster.lease_ms=2000"],
                            stdout=open(head_log, "w"), stderr=subprocess.STDOUT)
    ranks = {}  # (group, rank) -> (process, log)

    def start_group(group):
        port = free_port()
        for rank in range(2):
            log = os.path.join(work, f"{group}{rank}.log")
            env = dict(os.environ, PYTHONPATH=package, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                       MASTER_PORT=str(port))
            ranks[(group, rank)] = (subprocess.Popen(
                [sys.executable, os.path.join(EXAMPLE, "classifier_ddp.py"), "--head", endpoint, "--log-every", "100"],
                stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env), log)

    def active_members():
        r = subprocess.run([atollctl, "--head", endpoint, "members", "--json"], text=True, capture_output=True,
                           timeout=30)
        return [m for m in json.loads(r.stdout) if m["state"] == "active"] if r.returncode == 0 else []

    try:
        endpoint = wait_for_endpoint(head_dir)
        start_group("a")
        start_group("b")
        check(wait_for(lambda: "step 300:" in text_of(ranks[("b", 0)][1]), 180), "two groups of two processes train")
        active = active_members()
        print(json.dumps(active)[:1500])
        check(len(active) == 2 and all(len(m["workers"]) == 1 for m in active),
              f"the head counts one node with one worker per group ({len(active)} active)")

        killed_at = time.time()
        ranks[("b", 1)][0].send_signal(signal.SIGKILL)
        leader, leader_log = ranks[("b", 0)]
        leader.wait(timeout=60)
        print(text_of(leader_log)[-1500:])
        lost = [why for why in ("GroupLost", "Connection reset by peer", "Connection closed by peer")
                if why in text_of(leader_log)]
        check(leader.returncode != 0 and lost,
              f"the killed process's group leader fails ({lost}) and exits ({time.time() - killed_at:.1f} s)")
        check(wait_for(lambda: len(active_members()) == 1, 30), "the head sees the group's node go")

        start_group("c")
        check(wait_for(lambda: "replica" in text_of(ranks[("c", 1)][1]), 120), "a new group joins the running run")
        results = []
        for group, rank in (("a", 0), ("a", 1), ("c", 0), ("c", 1)):
            proc, log = ranks[(group, rank)]
            proc.wait(timeout=600)
            print(text_of(log)[-800:])
            check(proc.returncode == 0, f"process {rank} of group {group} trains to the end")
            results.append(last_json(text_of(log)))
        check(all(r and r["steps"] > 0 for r in results), "every process took steps")
        digests = {r["digest"] for r in results}
        check(len(digests) == 1, f"the four processes of both groups end with bit-identical parameters ({digests})")
        check(wait_for(lambda: "run training -> finished" in text_of(head_log), 30), "the run finishes")

        out = os.path.join(work, "trained.pt")
        r = subprocess.run([atoll_bin, "export", "--run-dir", head_dir, "--out", out], text=True,
                           capture_output=True, timeout=120)
        check(r.returncode == 0, "atoll export writes the run's model: " + r.stderr.strip())
        load = (f"import sys, torch; sys.path.insert(0, {EXAMPLE!r}); import blobs; m = blobs.Classifier(); "
                f"m.load_state_dict(torch.load({out!r})); print(blobs.parameter_digest(m))")
        r = subprocess.run([sys.executable, "-c", load], text=True, capture_output=True, timeout=120)
        check(r.returncode == 0 and r.stdout.strip() == results[0]["digest"],
              f"the run's committed model is the group's ({r.stdout.strip()} {r.stderr[-300:]})")
    finally:
        stop_all(head, [proc for proc, _ in ranks.values()])
        print(text_of(head_log)[-3000:])


if __name__ == "__main__":
    main()
