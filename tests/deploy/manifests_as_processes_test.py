#!/usr/bin/env python3
"""The Kubernetes kit run as local processes, with this script as the cluster (no cluster is
reachable from these machines): the rendered manifests' containers start as they are written
(command, args, env with $(VAR) expanded, Secrets and ConfigMaps as folders at their mount
paths), each "pod" with its probes polled as declared, and the Job and JobSet controllers'
part played from the manifests' own policies.

  1. the head (StatefulSet atoll-head) and the first node group (JobSet atoll-nodes) start;
     each probe as declared (port, path, period, thresholds) turns the pod ready;
  2. a node pod is SIGKILLed: its podFailurePolicy counts exit 137, its Job replaces the pod,
     and no other pod restarts; the new one rejoins;
  3. a second group (node-group/, JobSet atoll-nodes-b) is applied mid-run: its nodes are
     productive (a step reported) within 10 s of their processes' start;
  4. it is deleted: its pods get SIGTERM, leave the run (members "left", not "dead") and exit
     143, which their podFailurePolicy ignores;
  5. the run finishes: every Job of the first group completes with exit 0, and every worker
     holds the keeper's digest of every fragment.

A pod's addresses are the only thing changed: the Services' names (atoll-head-0.atoll-head)
map to 127.0.0.1 and each pod's fixed ports (the head's 7070 and 8080, a node's 8081) to free
ones, since the pods share this machine's network. The run's config is the ConfigMap's with
a small model and few steps (the user's own file, as a user would edit it).

  manifests_as_processes_test.py --atoll BIN --atollctl BIN --out DIR [--replicas N] [--break WHAT]

--break WHAT runs the same test on a manifest broken on purpose, which must fail it: flag (a
flag atoll join lacks: exit 2, the Job fails), env (an env var the args name, renamed),
probe-port (readiness asked on a port nothing serves), exit-policy (the drained code not ignored).
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KIT = os.path.join(ROOT, "deploy", "kubernetes")
SERVICE_HOSTS = re.compile(r"atoll-head-(\d+)\.atoll-head")
TEST_CONFIG = """[run]
example = "mlp"
steps = {steps}
min_workers = 2
[model]
width = 32
[diloco]
sync_every = 1000
[cluster]
heartbeat_ms = 300
lease_ms = 3000
handover_ms = 5000
[storage]
keepers = "nodes"
"""


def fail(message):
    print(f"FAILED: {message}", flush=True)
    sys.exit(1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def secret_files_from_docs():
    """Secret name -> the files docs/operations.md has the user put in it (`kubectl create secret`)."""
    text = open(os.path.join(ROOT, "docs", "operations.md")).read().replace("\\\n", " ")
    found = {}
    for name, rest in re.findall(r"kubectl create secret generic (\S+)((?: +--from-file=\S+)+)", text):
        found[name] = [os.path.basename(f) for f in re.findall(r"--from-file=(\S+)", rest)]
    return found


def render(path):
    out = subprocess.run(["kubectl", "kustomize", path], capture_output=True, text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


class Pod:
    """One pod's container as a local process, its probes polled as the kubelet would."""

    def __init__(self, name, spec, ctx, job=None):
        self.name, self.spec, self.ctx, self.job = name, spec, ctx, job
        self.container = spec["containers"][0]
        self.dir = os.path.join(ctx["out"], "pods", name)
        self.ports = {}  # the container's port -> this pod's local port
        self.proc, self.started, self.ready_at, self.exit = None, None, None, None
        self.liveness_kills = 0
        self.stop_probing = threading.Event()

    def local(self, port):
        return self.ports.setdefault(int(port), free_port())

    def argv(self):
        env = {}
        for e in self.container.get("env", []):
            if "value" in e:
                env[e["name"]] = e["value"]
            elif "resourceFieldRef" in e.get("valueFrom", {}):
                ref = e["valueFrom"]["resourceFieldRef"]
                env[e["name"]] = str(self.container["resources"][ref["resource"].split(".")[0]][ref["resource"].split(".")[1]])
            elif "fieldRef" in e.get("valueFrom", {}):
                env[e["name"]] = self.name
        args = [re.sub(r"\$\((\w+)\)", lambda m: env.get(m.group(1), m.group(0)), a) for a in self.container["args"]]
        # Volumes at their mount paths: folders of this pod's.
        mounts = {}
        for m in self.container.get("volumeMounts", []):
            vol = next((v for v in self.spec.get("volumes", []) if v["name"] == m["name"]), {"name": m["name"]})
            where = os.path.join(self.dir, m["name"])
            os.makedirs(where, exist_ok=True)
            if "secret" in vol:
                files = self.ctx["secrets"].get(vol["secret"]["secretName"])
                if files is None:
                    fail(f"{self.name}: Secret {vol['secret']['secretName']} is none the docs have the user create")
                for f in files:
                    shutil.copy(os.path.join(self.ctx["keys"], f), where)
                    os.chmod(os.path.join(where, f), 0o600)
            elif "configMap" in vol:
                cm = self.ctx["config_maps"].get(vol["configMap"]["name"])
                if cm is None:
                    fail(f"{self.name}: ConfigMap {vol['configMap']['name']} is not rendered")
                for key, text in cm.items():
                    open(os.path.join(where, key), "w").write(text)
            mounts[m["mountPath"]] = where
        out = []
        for a in args:
            for path, where in mounts.items():
                a = a.replace(path, where)
            a = SERVICE_HOSTS.sub(lambda m: "127.0.0.1", a)
            # The head's port as the nodes dial it, and every address a pod binds: this pod's own.
            a = re.sub(r"127\.0\.0\.1:7070", f"127.0.0.1:{self.ctx['head_port']}", a)
            a = re.sub(r"tcp://0\.0\.0\.0:(\d+)", lambda m: f"tcp://127.0.0.1:{self.local(m.group(1))}", a)
            out.append(a)
        if self.container["command"] != ["atoll"]:
            fail(f"{self.name}: command {self.container['command']}, not atoll")
        return [self.ctx["atoll"]] + out

    def start(self):
        os.makedirs(self.dir, exist_ok=True)
        argv = self.argv()
        log = open(os.path.join(self.ctx["out"], "logs", f"{self.name}.log"), "ab")
        self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.started, self.ready_at, self.exit = time.monotonic(), None, None
        self.stop_probing.clear()
        threading.Thread(target=self.kubelet, daemon=True).start()

    def probe(self, kind):
        p = self.container.get(kind, {}).get("httpGet")
        if not p:
            return True
        ports = {q.get("name"): q["containerPort"] for q in self.container.get("ports", [])}
        port = ports.get(p["port"], p["port"])
        if not isinstance(port, int):
            return False  # a named port the container does not have
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.local(port)}{p['path']}",
                                        timeout=self.container[kind].get("timeoutSeconds", 1)) as r:
                return 200 <= r.status < 400
        except Exception:
            return False

    def kubelet(self):
        """startupProbe until it passes (or the pod is killed), then liveness and readiness."""
        c = self.container
        s = c.get("startupProbe", {})
        failures = 0
        while not self.stop_probing.is_set() and self.proc.poll() is None:
            if self.probe("startupProbe"):
                break
            failures += 1
            if failures >= s.get("failureThreshold", 3):
                self.liveness_kills += 1
                self.proc.kill()
                return
            self.stop_probing.wait(s.get("periodSeconds", 10))
        live_fail = 0
        next_live = next_ready = time.monotonic()
        while not self.stop_probing.is_set() and self.proc.poll() is None:
            now = time.monotonic()
            if now >= next_ready:
                ok = self.probe("readinessProbe")
                if ok and self.ready_at is None:
                    self.ready_at = now
                next_ready = now + c.get("readinessProbe", {}).get("periodSeconds", 10)
            if now >= next_live:
                live_fail = 0 if self.probe("livenessProbe") else live_fail + 1
                if live_fail >= c.get("livenessProbe", {}).get("failureThreshold", 3):
                    self.liveness_kills += 1
                    self.proc.kill()
                    return
                next_live = now + c.get("livenessProbe", {}).get("periodSeconds", 10)
            self.stop_probing.wait(0.2)

    def poll(self):
        if self.exit is None and self.proc is not None and self.proc.poll() is not None:
            code = self.proc.returncode
            self.exit = 128 - code if code < 0 else code  # a signal's death as a shell reports it
            self.stop_probing.set()
        return self.exit


class Job:
    """A JobSet's child Job of one pod: podFailurePolicy, backoffLimit, completion."""

    def __init__(self, jobset, index, spec, ctx):
        self.name = f"{jobset}-node-{index}"
        self.spec, self.ctx = spec, ctx
        self.failures, self.pods_made, self.state = 0, 0, "active"
        self.pod = None
        self.new_pod()

    def new_pod(self):
        self.pods_made += 1
        self.pod = Pod(f"{self.name}-{self.pods_made}", self.spec["template"]["spec"], self.ctx, self)
        self.pod.start()

    def action_for(self, code):
        for rule in self.spec.get("podFailurePolicy", {}).get("rules", []):
            on = rule.get("onExitCodes")
            if on and (on["operator"] == "In") == (code in on["values"]):
                return rule["action"]
        return "Count"

    def reconcile(self, deleting=False):
        code = self.pod.poll() if self.state == "active" else None
        if code is None:
            return
        if code == 0:
            self.state = "complete"
        elif deleting:
            self.state = "deleted"
        else:
            action = self.action_for(code)
            self.ctx["events"].append((self.pod.name, code, action))
            if action == "FailJob":
                self.state = "failed: PodFailurePolicy"
            elif action == "Ignore":
                self.new_pod()
            else:
                self.failures += 1
                if self.failures > self.spec.get("backoffLimit", 6):
                    self.state = "failed: BackoffLimitExceeded"
                else:
                    self.new_pod()


def jobs_of(jobset, ctx, replicas_cap):
    rj = jobset["spec"]["replicatedJobs"][0]
    count = min(rj.get("replicas", 1), replicas_cap)
    return [Job(jobset["metadata"]["name"], i, rj["template"]["spec"], ctx) for i in range(count)]


def ctl(ctx, command):
    r = subprocess.run([ctx["atollctl"], "--head", f"tcp://127.0.0.1:{ctx['head_port']}", "--keys", ctx["keys"],
                        "--timeout", "3000", command, "--json"], capture_output=True, text=True, timeout=15)
    return json.loads(r.stdout) if r.returncode == 0 else None


def breakage(docs, what):
    js = next(d for d in docs if d["kind"] == "JobSet")
    c = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]
    if what == "flag":
        c["args"][c["args"].index("--health")] = "--heath"
    elif what == "env":
        next(e for e in c["env"] if e["name"] == "ATOLL_HEAD")["name"] = "ATOLL_HEADS"
    elif what == "probe-port":
        c["readinessProbe"]["httpGet"]["port"] = 8082
    elif what == "exit-policy":  # SIGTERM's drained code no longer ignored: a deletion counts as failures
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][1]["onExitCodes"]["values"] = [144]
    else:
        fail(f"--break {what}: none such")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--atollctl", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--replicas", type=int, default=3, help="at most this many nodes a group (two shared cores)")
    ap.add_argument("--steps", type=int, default=60000)
    ap.add_argument("--break", dest="broken", default="")
    args = ap.parse_args()
    if not shutil.which("kubectl"):
        print("SKIPPED: no kubectl on this machine (the manifests cannot be rendered)")
        sys.exit(77)
    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "logs"))
    first = render(os.path.join(KIT, "overlays", "cpu"))
    second = render(os.path.join(KIT, "node-group"))
    if args.broken:
        breakage(first, args.broken)
        breakage(second, args.broken)

    keys = os.path.join(args.out, "keys")
    subprocess.run([args.atoll, "keygen", "--out", keys], check=True, capture_output=True)
    with open(os.path.join(keys, "http.token"), "w") as f:  # as the docs' command makes it
        f.write(os.urandom(32).hex())
    config_maps = {d["metadata"]["name"]: dict(d["data"]) for d in first if d["kind"] == "ConfigMap"}
    for data in config_maps.values():
        if "run.toml" in data:
            data["run.toml"] = TEST_CONFIG.format(steps=args.steps)
    ctx = {"out": args.out, "atoll": args.atoll, "atollctl": args.atollctl, "keys": keys,
           "secrets": secret_files_from_docs(), "config_maps": config_maps, "head_port": free_port(), "events": []}

    head_set = next(d for d in first if d["kind"] == "StatefulSet" and d["metadata"]["name"] == "atoll-head")
    head = Pod("atoll-head-0", head_set["spec"]["template"]["spec"], ctx)
    head.ports[7070] = ctx["head_port"]
    head.start()
    group_a = jobs_of(next(d for d in first if d["kind"] == "JobSet"), ctx, args.replicas)
    group_b = []
    everyone = lambda: [head] + [j.pod for j in group_a]
    try:
        deadline = time.monotonic() + 90
        while not all(p.ready_at for p in everyone()):
            for j in group_a:
                j.reconcile()
            if time.monotonic() > deadline or any(j.state.startswith("failed") for j in group_a) or head.poll() is not None:
                fail(f"not every pod became ready (head ready: {head.ready_at is not None}; jobs "
                     f"{[(j.name, j.state, j.pod.ready_at is not None) for j in group_a]}); logs in {args.out}/logs")
            time.sleep(0.2)
        print(f"ready: the head and {len(group_a)} nodes, each by its own probes", flush=True)

        # 2. A node killed: its own Job replaces it; nobody else restarts.
        victim = group_a[-1]
        victim.pod.proc.send_signal(signal.SIGKILL)
        deadline = time.monotonic() + 30
        while victim.pods_made < 2 or victim.pod.ready_at is None:
            for j in group_a:
                j.reconcile()
            if time.monotonic() > deadline:
                fail(f"the killed node's pod was not replaced and ready within 30 s: {ctx['events']}")
            time.sleep(0.2)
        others = [j.pods_made for j in group_a if j is not victim]
        if any(n != 1 for n in others) or head.exit is not None:
            fail(f"another pod restarted when one node was killed: {[(j.name, j.pods_made) for j in group_a]}")
        print(f"killed {victim.name}'s pod: exit 137 counted ({victim.failures} of backoffLimit), replaced and ready "
              f"again in {victim.pod.ready_at - victim.pod.started:.1f} s; no other pod restarted", flush=True)

        # 3. A second group mid-run: productive within 10 s of its processes' start.
        before = {w["id"] for w in (ctl(ctx, "status") or {}).get("workers", [])}
        group_b = jobs_of(next(d for d in second if d["kind"] == "JobSet"), ctx, args.replicas)
        started = time.monotonic()
        productive_at = None
        while time.monotonic() - started < 30:
            for j in group_a + group_b:
                j.reconcile()
            workers = (ctl(ctx, "status") or {}).get("workers", [])
            new = [w for w in workers if w["id"] not in before and w.get("step", 0) > 0]
            if len(new) >= len(group_b):
                productive_at = time.monotonic()
                break
            time.sleep(0.2)
        if productive_at is None or productive_at - started > 10:
            fail(f"the second group was not productive within 10 s of its start "
                 f"({'never' if productive_at is None else f'{productive_at - started:.1f} s'})")
        print(f"group b: {len(group_b)} nodes productive {productive_at - started:.1f} s after their start", flush=True)

        # 4. The second group deleted: SIGTERM, a leave, exit 143, ignored.
        b_nodes = {j.pod.proc.pid for j in group_b}
        for j in group_b:
            j.pod.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 60
        while any(j.pod.poll() is None for j in group_b):
            if time.monotonic() > deadline:
                fail("a deleted group's node did not end within its grace")
            time.sleep(0.2)
        codes = sorted({j.pod.exit for j in group_b})
        actions = {j.action_for(j.pod.exit) for j in group_b}
        members = ctl(ctx, "members") or []
        states = [m["state"] for m in members if m.get("pid") in b_nodes]
        if codes != [143] or actions != {"Ignore"} or states != ["left"] * len(b_nodes):
            fail(f"the deleted group's nodes exited {codes} (their policy: {actions}), members {states}; "
                 "a deletion must be a leave (143, ignored), not a death")
        for j in group_b:
            j.reconcile(deleting=True)
        print("group b deleted: every node left the run (members 'left'), exit 143, ignored by its policy",
              flush=True)

        # 5. The run finishes: every Job complete, every worker at the keeper's digest.
        deadline = time.monotonic() + 600
        while any(j.state == "active" for j in group_a):
            for j in group_a:
                j.reconcile()
            if time.monotonic() > deadline:
                fail("the run did not finish within 10 minutes")
            time.sleep(0.5)
        if any(j.state != "complete" for j in group_a):
            fail(f"not every Job completed: {[(j.name, j.state) for j in group_a]}; events {ctx['events']}")
        fragments = ctl(ctx, "fragments") or []
        print(f"finished: every Job complete; liveness kills {sum(p.liveness_kills for p in everyone())}; "
              f"events {ctx['events']}", flush=True)
        if any(p.liveness_kills for p in everyone()):
            fail("a liveness probe killed a pod")
        agreeing = [w["id"] for f in fragments for w in f.get("workers", [])
                    if w.get("round") == f.get("round") and w.get("digest") == f.get("keeper_digest")]
        if not fragments or len(agreeing) < len(fragments) * len(group_a):
            fail(f"not every worker holds the keeper's digest at the final round: {json.dumps(fragments)[:2000]}")
        print("ok: the manifests ran as processes and kept the contract")
    finally:
        for p in [head] + [j.pod for j in group_a] + [j.pod for j in group_b]:
            if p.proc and p.proc.poll() is None:
                os.killpg(p.proc.pid, signal.SIGKILL)


if __name__ == "__main__":
    main()
