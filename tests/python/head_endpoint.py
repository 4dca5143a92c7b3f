"""A test's head: the address it listens on (`atoll up --listen tcp://127.0.0.1:0` writes it
to RUN_DIR/head.endpoint once bound), and stopping it with the nodes a test started."""
import os
import subprocess
import time


def wait_for_endpoint(head_dir, seconds=30):
    path = os.path.join(head_dir, "head.endpoint")
    deadline = time.time() + seconds
    while time.time() < deadline:
        if os.path.exists(path):
            text = open(path).read().strip()
            if text:
                return text
        time.sleep(0.1)
    raise SystemExit(f"FAILED: no head endpoint in {path} after {seconds} s")


def stop_all(head, nodes):
    """Kills the nodes still running, then stops the head (SIGTERM, SIGKILL after 30 s)."""
    for proc in nodes:
        if proc.poll() is None:
            proc.kill()
    head.terminate()
    try:
        head.wait(timeout=30)
    except subprocess.TimeoutExpired:
        head.kill()


def stop_and_show(head, nodes, head_log):
    """stop_all, then the tail of the head's log (opened by the test as `head_log`)."""
    stop_all(head, nodes)
    head_log.close()
    print(open(head_log.name).read()[-3000:])
