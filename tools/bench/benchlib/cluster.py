"""A head and nodes as real processes, for the benchmarks: start them, wait for the head's
endpoint or for a state, ask atollctl, and stop them. A head that exits before it listens
raises ClusterDied with the log to read: a bench whose cluster died fails, it writes no figure."""
import json
import os
import signal
import socket
import subprocess
import time


class ClusterDied(RuntimeError):
    """The head (or every node) ended before the bench could measure: no figure stands."""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spawn(argv, log_path, append=True):
    """argv as its own process group (so it can be killed whole), its output to log_path."""
    os.makedirs(os.path.dirname(log_path) or ".", exist_ok=True)
    log = open(log_path, "ab" if append else "wb")
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def read_endpoint(head_dir):
    """The endpoint `atoll up --listen tcp://HOST:0` wrote to HEAD_DIR/head.endpoint, or None."""
    try:
        with open(os.path.join(head_dir, "head.endpoint")) as f:
            return f.read().strip() or None
    except FileNotFoundError:
        return None


def wait_for_endpoint(head_dir, head=None, timeout=60, log=None):
    """Waits for the head in head_dir to listen; ClusterDied if `head` exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        endpoint = read_endpoint(head_dir)
        if endpoint:
            return endpoint
        if head is not None and head.poll() is not None:
            raise ClusterDied(f"the head exited ({head.returncode}) before it listened; see {log or head_dir}")
        time.sleep(0.05)
    raise ClusterDied(f"the head wrote no endpoint in {head_dir} within {timeout} s; see {log or head_dir}")


def start_head(atoll, run_dir, args, name="head", listen="tcp://127.0.0.1:0", timeout=60):
    """`atoll up` on RUN_DIR/NAME with `args`, its log RUN_DIR/logs/NAME.log; returns
    (process, endpoint) once it listens."""
    log = os.path.join(run_dir, "logs", f"{name}.log")
    head = spawn([atoll, "up", "--listen", listen, "--run-dir", os.path.join(run_dir, name)] + list(args), log)
    return head, wait_for_endpoint(os.path.join(run_dir, name), head, timeout, log)


def join(atoll, endpoint, log_path, args=()):
    """`atoll join` a node to the head at endpoint."""
    return spawn([atoll, "join", "--head", endpoint] + list(args), log_path)


def ctl(atollctl, endpoint, command, timeout_ms=3000):
    """`atollctl COMMAND --json` parsed, or None when the head does not answer."""
    try:
        out = subprocess.run([atollctl, "--head", endpoint, "--timeout", str(timeout_ms), command, "--json"],
                             capture_output=True, text=True, timeout=timeout_ms / 1000 + 7)
        return json.loads(out.stdout) if out.returncode == 0 else None
    except (subprocess.TimeoutExpired, json.JSONDecodeError):
        return None


def wait_until(predicate, timeout, what, poll=0.1):
    """Polls predicate() until it returns something true (returned); TimeoutError says `what`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll)
    raise TimeoutError(f"{what}: not within {timeout} s")


def stop(atoll, endpoint, procs, timeout=15):
    """`atoll down`, then each process waited for, and its group killed if it lingers."""
    if endpoint:
        subprocess.run([atoll, "down", "--head", endpoint], capture_output=True, timeout=timeout)
    for p in procs:
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
