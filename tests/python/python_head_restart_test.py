#!/usr/bin/env python3
"""Python nodes ride out a head that goes away (real processes): two Python nodes train
examples/python/classifier.py; the head is SIGKILLed mid-run and restarted from its run
dir on the same address a few seconds later. The nodes keep training meanwhile (their
rounds wait for the head's registry), reconnect as `atoll join` nodes do, and the run
finishes with both nodes' parameters bit-identical and the export equal to them.

Usage: python_head_restart_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import os
import shutil
import signal
import subprocess
import sys
import time

from checks import check, last_json, text_of, wait_for_text
from head_endpoint import stop_all, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python")
STEPS = 3000


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package)
    head_dir = os.path.join(work, "head")

    def start_head(listen, log):
        return subprocess.Popen([atoll_bin, "up", "--listen", listen, "--run-dir", head_dir,
                                 "--set", "run.example=external", "--set", f"run.steps={STEPS}",
                                 "--set", "run.min_workers=2", "--set", "diloco.sync_every=50",
                                 "--set", "diloco.fragments=3", "--set", "diloco.outer_lr=1",
                                 "--set", "diloco.outer_momentum=0"],
                                stdout=open(os.path.join(work, log), "w"), stderr=subprocess.STDOUT)

    head = start_head("tcp://127.0.0.1:0", "head1.log")
    nodes = []
    try:
        endpoint = wait_for_endpoint(head_dir)
        for i in range(2):
            log = os.path.join(work, f"node{i}.log")
            nodes.append((subprocess.Popen([sys.executable, os.path.join(EXAMPLE, "classifier.py"), "--head", endpoint,
                                            "--log-every", "100"],
                                           stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env), log))
        check(wait_for_text(nodes[0][1], "step 500:", 120), "two Python nodes train")
        head.send_signal(signal.SIGKILL)
        head.wait()
        time.sleep(3)
        check(all(proc.poll() is None for proc, _ in nodes), "the nodes stay up while the head is gone")
        os.remove(os.path.join(head_dir, "head.endpoint"))
        head = start_head(endpoint, "head2.log")
        check(wait_for_endpoint(head_dir) == endpoint, "the head restarts from its run dir on the same address")
        results = []
        for proc, log in nodes:
            proc.wait(timeout=600)
            print(text_of(log)[-1200:])
            check(proc.returncode == 0, f"a Python node trains to the end ({log})")
            results.append(last_json(text_of(log)))
        check(all(r and r["steps"] == STEPS for r in results), f"each node took {STEPS} steps")
        check(results[0]["digest"] == results[1]["digest"],
              f"both nodes end with bit-identical parameters ({results[0]['digest']})")
        check(wait_for_text(os.path.join(work, "head2.log"), "run training -> finished", 30),
              "the restarted head finishes the run")
        out = os.path.join(work, "trained.pt")
        r = subprocess.run([atoll_bin, "export", "--run-dir", head_dir, "--out", out], text=True,
                           capture_output=True, timeout=120)
        load = (f"import sys, torch; sys.path.insert(0, {EXAMPLE!r}); import blobs; m = blobs.Classifier(); "
                f"m.load_state_dict(torch.load({out!r})); print(blobs.parameter_digest(m))")
        r2 = subprocess.run([sys.executable, "-c", load], text=True, capture_output=True, timeout=120, env=env)
        check(r.returncode == 0 and r2.stdout.strip() == results[0]["digest"],
              f"the export holds the nodes' final parameters ({r.stderr.strip()} {r2.stdout.strip()})")
    finally:
        stop_all(head, [proc for proc, _ in nodes])
        for log in ("head1.log", "head2.log"):
            print(text_of(os.path.join(work, log))[-2000:])


if __name__ == "__main__":
    main()
