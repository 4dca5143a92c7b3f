"""What every `./tools/dev bench` harness shares, so that each harness is the experiment alone:

  cluster     a head and nodes as real processes: start, wait for the head's endpoint or a
              state, atollctl, stop; a dead head is an error (ClusterDied), never a figure
  metrics     the metrics file's lines (round, step, summary, ...)
  procstat    a process's CPU seconds and resident memory, from /proc
  netns       network namespaces and tc shaping (root), the bytes a link carried
  throttle    a process held to a share of a core (SIGSTOP/SIGCONT)
  etcd        a three-member etcd on loopback
  provenance  the run.json beside every results file: command, date, machine, revision

The harnesses import it as `from benchlib import cluster` (tools/bench is on sys.path when a
harness runs as a script). What each results file holds: docs/benchmarks.md, "Results files".
"""
