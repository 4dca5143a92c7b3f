#!/usr/bin/env python3
"""Throttles a process to a share of its speed for a while: SIGSTOP and SIGCONT on a
duty cycle (--period-ms, default 60), so that it runs `--share` of each period (a CPU
quota such as cgroup cpu.max would need a cgroup of our own). The process is left running
(SIGCONT) when the time is up, or when this script is terminated.

Usage: tools/bench/benchlib/throttle.py PID --share 0.25 --seconds 20 [--period-ms 60]
       throttle.start(pid, share, seconds) from a script: the throttling process (Popen)
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def start(pid, share, seconds, period_ms=60):
    """Throttles `pid` in a process of its own; kill() it to stop early (it resumes pid)."""
    return subprocess.Popen([sys.executable, os.path.abspath(__file__), str(pid), "--share", str(share),
                             "--seconds", str(seconds), "--period-ms", str(period_ms)])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("pid", type=int)
    p.add_argument("--share", type=float, required=True, help="the fraction of each period it runs, in (0, 1]")
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--period-ms", type=float, default=60)
    a = p.parse_args()
    if not 0 < a.share <= 1:
        p.error("--share must be in (0, 1]")
    running = a.period_ms * a.share / 1000
    stopped = a.period_ms * (1 - a.share) / 1000
    done = [False]

    def finish(*_):
        done[0] = True
    signal.signal(signal.SIGTERM, finish)
    end = time.monotonic() + a.seconds
    try:
        while not done[0] and time.monotonic() < end and stopped > 0:
            os.kill(a.pid, signal.SIGSTOP)
            time.sleep(stopped)
            os.kill(a.pid, signal.SIGCONT)
            time.sleep(running)
    except ProcessLookupError:
        return
    try:
        os.kill(a.pid, signal.SIGCONT)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    main()
