"""Where a bench's figures come from: its command, date, machine and revision, written beside
its results.json as run.json, so that a table rendered from them (tools/bench/report.py) says so."""
import datetime
import json
import os
import subprocess
import sys


def machine():
    """The CPU model and the cores this machine has, e.g. "Intel Xeon ..., 2 cores"."""
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), model)
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores"


def revision():
    """The git revision of the tree the bench ran from, "-dirty" when it had changes."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        rev = subprocess.run(["git", "-C", root, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "-C", root, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return (rev or "unknown") + ("-dirty" if dirty else "")
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


def write(out_dir, bench):
    """DIR/run.json: {bench, command, date, machine, revision}."""
    record = {"bench": bench, "command": " ".join([os.path.basename(sys.argv[0])] + sys.argv[1:]),
              "date": datetime.date.today().isoformat(), "machine": machine(), "revision": revision()}
    with open(os.path.join(out_dir, "run.json"), "w") as f:
        json.dump(record, f, indent=1)
    return record
