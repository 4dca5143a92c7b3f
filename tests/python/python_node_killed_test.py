#!/usr/bin/env python3
"""A Python node SIGKILLed mid-run (the atoll package, real processes): the head declares
it dead (its connection closed), the rounds go on with the other two, a new Python node joins,
catches up from the committed state and trains to the end, and every node that finishes
holds the same parameters as the others.

Usage: python_node_killed_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import os
import shutil
import signal
import subprocess
import sys

from checks import check, last_json, wait_for_text
from head_endpoint import stop_all, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
CLASSIFIER = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python", "classifier.py")
STEPS = 3000


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package)
    head_dir = os.path.join(work, "head")
    head_log = os.path.join(work, "head.log")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir,
                             "--set", "run.example=external", "--set", f"run.steps={STEPS}",
                             "--set", "run.min_workers=2", "--set", "diloco.sync_every=50",
                             "--set", "diloco.fragments=3", "--set", "cluster.heartbeat_ms=300",
                             "--set", "cluster.lease_ms=2000"],
                            stdout=open(head_log, "w"), stderr=subprocess.STDOUT)
    procs = {}

    def start(name):
        log = os.path.join(work, f"{name}.log")
        procs[name] = (subprocess.Popen([sys.executable, CLASSIFIER, "--head", endpoint, "--log-every", "100"],
                                        stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env), log)

    try:
        endpoint = wait_for_endpoint(head_dir)
        for name in ("a", "b", "c"):
            start(name)
        check(wait_for_text(procs["c"][1], "step 500:", 120), "three Python nodes train")
        procs["c"][0].send_signal(signal.SIGKILL)
        procs["c"][0].wait()
        check(wait_for_text(head_log, "now dead", 30), "the head sees the killed node dead (its connection closed)")
        start("d")
        check(wait_for_text(procs["d"][1], "node rank", 60), "a new Python node joins the running run")
        finished = []
        for name in ("a", "b", "d"):
            proc, log = procs[name]
            proc.wait(timeout=300)
            print(open(log).read()[-800:])
            check(proc.returncode == 0, f"node {name} trains to the end")
            finished.append(last_json(open(log).read()))
        digests = {r["digest"] for r in finished}
        check(len(digests) == 1, f"every node that finished holds the same parameters ({digests})")
        check(wait_for_text(head_log, "run training -> finished", 30), "the run finishes")
    finally:
        stop_all(head, [proc for proc, _ in procs.values()])
        print(open(head_log).read()[-3000:])


if __name__ == "__main__":
    main()
