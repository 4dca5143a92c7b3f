#!/usr/bin/env python3
"""Atoll under a real Slurm on this machine (issue 33's test): munge, slurmctld and slurmd
start in a folder of their own (proctrack/linuxproc, task/none, 8 CPUs declared), and the
scripts of examples/slurm are submitted unchanged:

1. the head job and a node job of 2 tasks: rounds commit, each member names its job;
2. a second node job of 2 tasks: its nodes become active and the rounds go on;
3. scancel of the first node job: its nodes leave or die, rounds keep committing;
4. scontrol requeue of the head job: the head resumes the run past its last round;
5. every daemon it started is stopped, whatever the outcome.

Each step waits a bounded time and fails with what it saw. Needs root (slurmd runs jobs as
their users) and slurm-wlm + munge; without them it fails and says why.

Usage: slurm_test.py ATOLL_BINARY ATOLLCTL_BINARY WORK_DIR
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(HERE)), "examples", "slurm")


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what, flush=True)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SlurmOnThisMachine:
    """munged, slurmctld and slurmd with their state, sockets and logs under `work`."""

    def __init__(self, work):
        self.work = work
        self.conf = os.path.join(work, "slurm.conf")
        self.env = dict(os.environ, SLURM_CONF=self.conf)
        self.pids = []

    def start(self):
        for tool in ("munged", "slurmctld", "slurmd", "sbatch"):
            check(shutil.which(tool) is not None, f"{tool} is installed (apt install slurm-wlm munge)")
        check(os.geteuid() == 0, "the test runs as root (slurmd starts jobs as their users)")
        w = self.work
        for d in ("state", "spool", "log"):
            os.makedirs(os.path.join(w, d), exist_ok=True)
        key = os.path.join(w, "munge.key")
        with open(key, "wb") as f:
            f.write(os.urandom(1024))
        os.chmod(key, 0o600)
        self.socket = os.path.join(w, "munge.socket")
        subprocess.run(["munged", "-f", f"--key-file={key}", f"--socket={self.socket}",
                        f"--pid-file={w}/munged.pid", f"--log-file={w}/log/munged.log", f"--seed-file={w}/munged.seed"],
                       check=True)
        host = socket.gethostname()
        with open(self.conf, "w") as f:
            f.write(f"""ClusterName=atoll-test
SlurmctldHost={host}
AuthType=auth/munge
AuthInfo=socket={self.socket}
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={w}/state
SlurmdSpoolDir={w}/spool
SlurmctldPidFile={w}/slurmctld.pid
SlurmdPidFile={w}/slurmd.pid
SlurmctldLogFile={w}/log/slurmctld.log
SlurmdLogFile={w}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SlurmdParameters=config_overrides
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
JobRequeue=1
KillWait=5
MpiDefault=none
NodeName={host} CPUs=8 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
        for daemon in ("slurmctld", "slurmd"):
            r = subprocess.run([daemon, "-f", self.conf], env=self.env, capture_output=True, text=True)
            check(r.returncode == 0, f"{daemon} starts ({r.stderr.strip()[-500:]})")
        ok = wait_for(30, lambda: "idle" in self.run(["sinfo", "-h", "-o", "%t"]).stdout)
        check(ok, "the Slurm node is idle: " + self.run(["sinfo"]).stdout + self.logs())

    def run(self, cmd, **kw):
        return subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=60, **kw)

    def sbatch(self, script, env, sbatch_args=(), script_args=()):
        """Submits `script` as a user would (its environment exported) and returns the job id."""
        r = subprocess.run(["sbatch", "--parsable", "-D", self.work, *sbatch_args, script, *script_args],
                           env=dict(self.env, **env), capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, f"sbatch {os.path.basename(script)} {' '.join(sbatch_args)}: {r.stderr.strip()}")
        return r.stdout.strip().split(";")[0]

    def logs(self):
        text = ""
        for name in ("slurmctld.log", "slurmd.log"):
            path = os.path.join(self.work, "log", name)
            if os.path.exists(path):
                text += f"\n--- {name}\n" + open(path).read()[-2000:]
        return text

    def stop(self):
        self.run(["scancel", "--full", "--user=root"])
        # The daemons go only once no job is left: a job step whose slurmd was stopped first
        # kept running (a requeued head outlived the test by an hour, 2026-11-28).
        wait_for(30, lambda: self.run(["squeue", "--noheader"]).stdout.strip() == "")
        for name in ("slurmd.pid", "slurmctld.pid", "munged.pid"):
            path = os.path.join(self.work, name)
            try:
                pid = int(open(path).read().strip())
                os.kill(pid, 15)
                wait_for(10, lambda: not os.path.exists(f"/proc/{pid}"))
                if os.path.exists(f"/proc/{pid}"):
                    os.kill(pid, 9)
            except (OSError, ValueError):
                pass


def wait_for(seconds, cond, every=0.5):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if cond():
                return True
        except Exception:  # noqa: BLE001  (a head restarting answers nothing for a while)
            pass
        time.sleep(every)
    return False


def main():
    atoll, atollctl, work = (os.path.abspath(a) for a in sys.argv[1:4])
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    slurm = SlurmOnThisMachine(work)
    run_dir = os.path.join(work, "run")
    env = {"ATOLL_RUN": run_dir, "ATOLL": atoll, "ATOLL_PORT": str(free_port()), "ATOLL_WAIT": "120"}

    def status(what="status"):
        address = open(os.path.join(run_dir, "head.address")).read().strip()
        r = subprocess.run([atollctl, "--head", address, "--keys", os.path.join(run_dir, "keys"), "--json",
                            "--timeout", "2000", what], capture_output=True, text=True, timeout=30)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def rounds():
        s = status()
        return min(f["round"] for f in s["fragments"]) if s and s["fragments"] else -1

    def members():
        return status("members") or []

    try:
        slurm.start()
        head = slurm.sbatch(os.path.join(EXAMPLES, "head.sbatch"), env, script_args=[
            "--set", "run.example=mlp", "--set", "run.steps=1000000", "--set", "run.min_workers=2",
            "--set", "diloco.sync_every=50", "--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000"])
        head_out = os.path.join(work, f"atoll-head-{head}.out")
        check(wait_for(60, lambda: "atoll head:" in open(head_out).read()),
              f"the head job {head} starts" + (open(head_out).read() if os.path.exists(head_out) else ""))
        nodes = os.path.join(EXAMPLES, "nodes.sbatch")
        first = slurm.sbatch(nodes, env, ["--ntasks=2", "--cpus-per-task=1"])
        # 1. Rounds commit; each member names its Slurm job.
        check(wait_for(120, lambda: rounds() >= 3), f"rounds commit with the head job {head} and node job {first}"
              + slurm.logs())
        jobs = {m["batch_job"] for m in status()["members"]}
        check(jobs == {f"slurm {first}.0"}, f"atollctl status names each member's Slurm job and step ({jobs})")
        # 2. A second node job joins and takes part.
        second = slurm.sbatch(nodes, env, ["--ntasks=2", "--cpus-per-task=1"])  # run.min_workers once the first goes
        check(wait_for(120, lambda: any(m["batch_job"] == f"slurm {second}.0" and m["state"] == "active"
                                        for m in members())), f"the second node job {second} becomes active")
        # 3. scancel of the first node job: its nodes go, rounds go on.
        before = rounds()
        slurm.run(["scancel", first])
        check(wait_for(60, lambda: all(m["state"] in ("left", "dead") for m in members()
                                       if m["batch_job"] == f"slurm {first}.0")),
              f"the nodes of the cancelled job {first} leave or are evicted")
        check(wait_for(120, lambda: rounds() >= before + 3), "rounds keep committing after the scancel")
        # 4. scontrol requeue of the head job: the run resumes from its last round.
        before = rounds()
        r = slurm.run(["scontrol", "requeue", head])
        check(r.returncode == 0, f"scontrol requeue {head}: {r.stderr.strip()}")
        # Slurm holds a requeued job for two minutes once it has stopped (its BeginTime); a
        # user may wait, or let it start at once as here.
        check(wait_for(60, lambda: slurm.run(["squeue", "-h", "-j", head, "-o", "%T"]).stdout.strip() == "PENDING"),
              "the requeued head job is pending again")
        r = slurm.run(["scontrol", "update", f"JobId={head}", "StartTime=now"])
        check(r.returncode == 0, f"the requeued head is let start at once (scontrol update StartTime=now) {r.stderr}")
        check(wait_for(120, lambda: "resuming run" in open(head_out).read()),
              "the requeued head resumes its run from the run dir")
        check(wait_for(120, lambda: rounds() >= before + 3),
              f"rounds commit past round {before} after the head's requeue (no committed round lost)")
    finally:
        for name in sorted(os.listdir(work)):
            if name.endswith(".out"):
                print(f"--- {name}\n" + open(os.path.join(work, name)).read()[-1500:])
        slurm.stop()


if __name__ == "__main__":
    main()
