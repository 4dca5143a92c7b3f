"""A process's CPU time and memory, read from /proc (Linux)."""
import os

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (FileNotFoundError, ProcessLookupError):
        return 0.0


def rss_mb(pid):
    """Resident memory in MB (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except FileNotFoundError:
        pass
    return 0.0


def _children_of():
    """parent pid -> its children's pids, for every process now (one pass over /proc)."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    return children


class TreeCpu:
    """The CPU seconds of some processes and every descendant of theirs, sampled every
    `every` seconds on a thread: a process that exits keeps its last reading, so the total
    never goes backwards. cpu_at(t) gives the total at a time.time() between samples."""

    def __init__(self, roots, every=0.05):
        import threading
        self._roots = list(roots)
        self._every = every
        self._last = {}  # pid -> its last CPU seconds
        self.samples = []  # (time.time(), total CPU seconds)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def add_root(self, pid):
        self._roots.append(pid)

    def _run(self):
        import time
        while not self._stop.is_set():
            children = _children_of()
            todo, seen = list(self._roots), set()
            while todo:
                pid = todo.pop()
                if pid in seen:
                    continue
                seen.add(pid)
                todo += children.get(pid, [])
                cpu = cpu_seconds(pid)
                if cpu > 0:
                    self._last[pid] = max(cpu, self._last.get(pid, 0.0))
            self.samples.append((time.time(), sum(self._last.values())))
            self._stop.wait(self._every)

    def stop(self):
        self._stop.set()
        self._thread.join()

    def total(self):
        """Every process's CPU seconds at the last sample (after stop(): the whole run's)."""
        return self.samples[-1][1] if self.samples else 0.0

    def cpu_at(self, t):
        """The total at time t, interpolated between the samples around it."""
        if not self.samples:
            return 0.0
        before = [s for s in self.samples if s[0] <= t]
        after = [s for s in self.samples if s[0] >= t]
        if not before:
            return after[0][1]
        if not after:
            return before[-1][1]
        (t0, c0), (t1, c1) = before[-1], after[0]
        return c0 if t1 == t0 else c0 + (c1 - c0) * (t - t0) / (t1 - t0)
