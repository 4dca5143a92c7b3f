#!/usr/bin/env python3
"""A Python node and a C++ node in one run (real processes): the head runs
run.example = external, the Python node trains a TorchScript GPT from its own loop
(examples/python/torchscript_lm.py), and `atoll join --model` trains the same file.

1. a C++ node with another TorchScript model is refused with model_mismatch naming the
   first difference;
2. while they train, every worker's theta_global digest of a fragment equals the keeper's
   at the same round (`atollctl fragments`), and at least one round is seen on both;
3. both train to the end, and `atoll export` of the run, loaded into the module in
   PyTorch, holds the Python node's final parameters bit for bit.

Usage: python_and_cpp_nodes_test.py ATOLL_BINARY PYTHON_PACKAGE_DIR WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
import time

from checks import check, last_json, text_of
from head_endpoint import stop_all, wait_for_endpoint

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "examples", "data", "tinyshakespeare.txt")
STEPS = 200


def script_model(path, width, env):
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "torchscript", "model.py"), "--out", path,
                    "--width", str(width), "--layers", "2"], check=True, capture_output=True, env=env, timeout=120)


def main():
    atoll_bin, package, work = sys.argv[1], sys.argv[2], sys.argv[3]
    atollctl = os.path.join(os.path.dirname(atoll_bin), "atollctl")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, PYTHONPATH=package)
    model, other = os.path.join(work, "model.pt"), os.path.join(work, "other.pt")
    script_model(model, 64, env)
    script_model(other, 32, env)
    head_dir, head_log = os.path.join(work, "head"), os.path.join(work, "head.log")
    head = subprocess.Popen([atoll_bin, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir,
                             "--set", "run.example=external", "--set", f"run.data={DATA}",
                             "--set", "run.min_workers=2", "--set", f"run.steps={STEPS}",
                             "--set", "diloco.sync_every=20", "--set", "diloco.fragments=2"],
                            stdout=open(head_log, "w"), stderr=subprocess.STDOUT)
    procs = []
    try:
        endpoint = wait_for_endpoint(head_dir)
        py_log, cpp_log = os.path.join(work, "python.log"), os.path.join(work, "cpp.log")
        procs.append(subprocess.Popen([sys.executable, os.path.join(ROOT, "examples", "python", "torchscript_lm.py"),
                                       "--head", endpoint, "--model", model, "--data", DATA],
                                      stdout=open(py_log, "w"), stderr=subprocess.STDOUT, env=env))
        deadline = time.time() + 120
        while "joined cluster" not in text_of(py_log) and time.time() < deadline:
            time.sleep(0.1)
        r = subprocess.run([atoll_bin, "join", "--head", endpoint, "--model", other], text=True, capture_output=True,
                           timeout=120)
        check(r.returncode == 4 and "model_mismatch" in r.stderr and "'embed.tok.weight' float32 256x32" in r.stderr,
              "a C++ node with another TorchScript model is refused, naming the first difference")
        procs.append(subprocess.Popen([atoll_bin, "join", "--head", endpoint, "--model", model],
                                      stdout=open(cpp_log, "w"), stderr=subprocess.STDOUT))

        # Both workers' digests against the keeper's, round by round, while they train.
        compared, mismatches = set(), []
        while procs[0].poll() is None or procs[1].poll() is None:
            r = subprocess.run([atollctl, "--head", endpoint, "fragments", "--json"], text=True, capture_output=True,
                               timeout=30)
            if r.returncode == 0:
                for f in json.loads(r.stdout):
                    same_round = [w for w in f["workers"] if w["round"] == f["round"]]
                    for w in same_round:
                        if w["digest"] != f.get("keeper_digest"):
                            mismatches.append((f["id"], f["round"], w, f.get("keeper_digest")))
                    if len(same_round) == 2:
                        compared.add((f["id"], f["round"]))
            time.sleep(0.2)
        check(not mismatches, f"every worker's digest equals the keeper's at its round ({mismatches[:3]})")
        check(compared, f"the Python and the C++ worker held the same theta_global at rounds {sorted(compared)[:6]}")
        print(text_of(py_log)[-800:], text_of(cpp_log)[-800:])
        check(procs[0].returncode == 0 and procs[1].returncode == 0, "the Python and the C++ node train to the end")
        result = last_json(text_of(py_log))
        check(result and result["steps"] == STEPS, f"the Python node took {STEPS} steps")

        out = os.path.join(work, "trained.pt")
        r = subprocess.run([atoll_bin, "export", "--run-dir", head_dir, "--out", out], text=True,
                           capture_output=True, timeout=120)
        check(r.returncode == 0, "atoll export writes the run's model: " + r.stderr.strip())
        load = (f"import sys, torch; sys.path.insert(0, {os.path.join(ROOT, 'examples', 'python')!r}); "
                f"import blobs; m = torch.jit.load({model!r}); m.load_state_dict(torch.load({out!r}), strict=False); "
                f"print(blobs.parameter_digest(m))")
        r = subprocess.run([sys.executable, "-c", load], text=True, capture_output=True, timeout=120)
        check(r.returncode == 0 and r.stdout.strip() == result["digest"],
              f"the run's committed model is the Python node's final one ({r.stdout.strip()} {r.stderr[-300:]})")
    finally:
        stop_all(head, procs)
        print(text_of(head_log)[-3000:])


if __name__ == "__main__":
    main()
