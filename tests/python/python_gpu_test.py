#!/usr/bin/env python3
"""A Python node whose model is on a CUDA device beside one on the CPU (real processes, a GPU
machine): a head and two Python nodes train examples/python/classifier.py, one with
--device cuda:0 and one with --device cpu, with int8 pseudo-gradients and error feedback.
The CUDA node syncs on the device (its replica says so: theta_global, the residual and the
encode stay there); both end with bit-identical parameters, and a held-out loss within 5%
of fp32 DiLoCo done by hand on the CPU (classifier_plain.py --replicas 2). Exits 77
(skipped) without a device.

Usage: python_gpu_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import os
import shutil
import subprocess
import sys

import torch

from checks import check, last_json
from head_endpoint import stop_all, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "python")
STEPS = 600
DEVICES = ["cuda:0", "cpu"]
ON_DEVICE = "outer sync on the device"  # the external replica's log line on a CUDA device


def main():
    if not torch.cuda.is_available():
        print("skipped: this PyTorch sees no CUDA device")
        sys.exit(77)
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package)
    head_dir = os.path.join(work, "head")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir,
                             "--set", "run.example=external", "--set", f"run.steps={STEPS}",
                             "--set", "diloco.sync_every=50", "--set", "diloco.fragments=3",
                             "--set", "run.min_workers=2", "--set", "diloco.outer_lr=1",
                             "--set", "diloco.outer_momentum=0", "--set", "diloco.codec=int8",
                             "--set", "diloco.error_feedback=true"],
                            stdout=open(os.path.join(work, "head.log"), "w"), stderr=subprocess.STDOUT)
    nodes = []
    try:
        endpoint = wait_for_endpoint(head_dir)
        for i, device in enumerate(DEVICES):
            log = open(os.path.join(work, f"node{i}.log"), "w")
            nodes.append((subprocess.Popen([sys.executable, os.path.join(EXAMPLE, "classifier.py"), "--head", endpoint,
                                            "--device", device],
                                           stdout=log, stderr=subprocess.STDOUT, env=env), log.name))
        results = []
        for (proc, log), device in zip(nodes, DEVICES):
            proc.wait(timeout=600)
            text = open(log).read()
            print(text[-1500:])
            check(proc.returncode == 0, f"a Python node with its model on {device} trains to the end ({log})")
            check((ON_DEVICE in text) == (device != "cpu"),
                  f"the node on {device} syncs {'on the device' if device != 'cpu' else 'on the host'} ({log})")
            results.append(last_json(text))
        check(results[0]["digest"] == results[1]["digest"],
              f"the CUDA and the CPU node end with bit-identical parameters ({results[0]['digest']})")
        by_hand = subprocess.run([sys.executable, os.path.join(EXAMPLE, "classifier_plain.py"), "--steps", str(STEPS),
                                  "--replicas", "2", "--sync-every", "50", "--outer-lr", "1", "--outer-momentum", "0"],
                                 text=True, capture_output=True, timeout=600)
        baseline = last_json(by_hand.stdout)["held_out_loss"]
        print(f"held-out loss: Atoll on cuda:0 and the CPU, int8 {results[0]['held_out_loss']:.4f}, "
              f"fp32 by hand on the CPU {baseline:.4f}")
        check(results[0]["held_out_loss"] <= baseline * 1.05, "within 5% of fp32 DiLoCo done by hand")
    finally:
        stop_all(head, [proc for proc, _ in nodes])


if __name__ == "__main__":
    main()
