"""The address a test's head listens on: `atoll up --listen tcp://127.0.0.1:0` writes it to
RUN_DIR/head.endpoint once bound."""
import os
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
