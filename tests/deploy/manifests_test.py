#!/usr/bin/env python3
"""The Kubernetes kit (deploy/kubernetes) renders, validates and keeps Atoll's contract, without
a cluster (none is reachable from these machines):

1. every kustomization (overlays/*, node-group) renders with `kubectl kustomize`, offline;
2. every object validates against its schema (tests/deploy/validate_manifests.mjs: core objects
   with npm's kubernetes-models, JobSets with ajv against the JobSet CRD's OpenAPI schema);
3. the rules no schema holds (JobSet's CEL and webhook rules, and Atoll's own contract):
   - at most 1024 replicas in a ReplicatedJob of a JobSet that restarts single Jobs;
   - names short enough for the Jobs, pods and hostnames made from them (63 characters);
   - every exit code a policy names is one `atoll` produces (runtime/core/exit_status.hpp),
     and fatal codes fail the Job, `drained` is ignored, disruptions are ignored;
   - every probe's port is the container's and its path one that port's process serves;
   - every flag an `atoll` container passes is one `atoll SUBCOMMAND --help` lists, and every
     $(VAR) in its args is defined in its env;
   - every Secret and ConfigMap a pod mounts is rendered beside it or is one the docs have the
     user create (the keys);
   - a node's grace on SIGTERM covers its keeper hand-over (cluster.handover_ms and five
     heartbeats, from the head's run.toml).
   Each rule is shown to fail on a manifest broken the way it guards against (the self-check).

  manifests_test.py --atoll BIN --npm-dir DIR [--crd JOBSET_CRD] --out DIR
"""
import argparse
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KIT = os.path.join(ROOT, "deploy", "kubernetes")
# The Secrets the user creates from `atoll keygen`'s files (docs/operations.md, "On Kubernetes").
USER_SECRETS = {"atoll-head-keys", "atoll-node-keys"}
# What each of atoll's HTTP endpoints serves (head/head_http.hpp, node/health_http.hpp).
SERVED = {"--health": {"/livez", "/readyz"}, "--http": {"/livez", "/readyz", "/metrics", "/"}}
JOB_NAME_MAX = 63


def kustomizations():
    found = [os.path.join(KIT, "overlays", d) for d in sorted(os.listdir(os.path.join(KIT, "overlays")))]
    return found + [os.path.join(KIT, "node-group")]


def exit_codes_produced():
    """name -> code, from runtime/core/exit_status.hpp's enum."""
    text = open(os.path.join(ROOT, "runtime", "core", "exit_status.hpp")).read()
    body = text[text.index("enum class exit_status"):]
    body = body[:body.index("};")]
    return {name: int(code) for name, code in re.findall(r"(\w+) = (\d+),", body)}


def pod_templates(doc):
    """(where, pod spec) of every pod an object makes."""
    if doc["kind"] == "StatefulSet":
        yield f"StatefulSet/{doc['metadata']['name']}", doc["spec"]["template"]["spec"]
    elif doc["kind"] == "JobSet":
        for rj in doc["spec"]["replicatedJobs"]:
            yield f"JobSet/{doc['metadata']['name']}/{rj['name']}", rj["template"]["spec"]["template"]["spec"]


def atoll_containers(spec):
    return [c for c in spec.get("containers", []) if c.get("command") == ["atoll"]]


def flag_value(args, flag):
    return args[args.index(flag) + 1] if flag in args and args.index(flag) + 1 < len(args) else None


# ---- the rules: each takes the rendered objects and returns sentences of what is wrong ----

def rule_restart_job_replicas(docs, _ctx):
    bad = []
    for d in docs:
        if d["kind"] != "JobSet":
            continue
        restarts_jobs = any(r.get("action", "").startswith("RestartJob") and not r["action"].startswith("RestartJobSet")
                            for r in d["spec"].get("failurePolicy", {}).get("rules", []))
        for rj in d["spec"]["replicatedJobs"]:
            if restarts_jobs and rj.get("replicas", 1) > 1024:
                bad.append(f"JobSet/{d['metadata']['name']}/{rj['name']}: {rj['replicas']} replicas with RestartJob "
                           "(at most 1024)")
    return bad


def rule_name_lengths(docs, _ctx):
    bad = []
    for d in docs:
        name = d["metadata"]["name"]
        if d["kind"] == "JobSet":
            for rj in d["spec"]["replicatedJobs"]:
                job = f"{name}-{rj['name']}-{rj.get('replicas', 1) - 1}"
                if len(job) > JOB_NAME_MAX:
                    bad.append(f"JobSet/{name}: its Job {job} is over {JOB_NAME_MAX} characters")
        elif d["kind"] == "StatefulSet" and len(name) > 52:  # pods get -N and a revision hash label
            bad.append(f"StatefulSet/{name}: over 52 characters")
        elif d["kind"] == "Service" and len(name) > 63:
            bad.append(f"Service/{name}: over 63 characters")
    return bad


def rule_exit_codes(docs, ctx):
    codes = ctx["exit_codes"]
    fatal, drained = {codes["config"], codes["refused"]}, codes["drained"]
    bad = []
    for d in docs:
        if d["kind"] != "JobSet":
            continue
        reasons = {r["action"]: set(r.get("onJobFailureReasons", [])) for r in d["spec"].get("failurePolicy", {}).get("rules", [])}
        if "PodFailurePolicy" not in reasons.get("FailJobSet", set()):
            bad.append(f"JobSet/{d['metadata']['name']}: a Job failed by its podFailurePolicy does not fail the set")
        for rj in d["spec"]["replicatedJobs"]:
            job = rj["template"]["spec"]
            where = f"JobSet/{d['metadata']['name']}/{rj['name']}"
            rules = job.get("podFailurePolicy", {}).get("rules", [])
            if job["template"]["spec"].get("restartPolicy") != "Never":
                bad.append(f"{where}: a podFailurePolicy needs restartPolicy Never")
            named = {}
            for r in rules:
                on = r.get("onExitCodes")
                if on:
                    for code in on["values"]:
                        if code not in codes.values():
                            bad.append(f"{where}: exit code {code} is not one atoll produces ({sorted(codes.values())})")
                        named.setdefault(r["action"], set()).add(code)
            if named.get("FailJob", set()) != fatal:
                bad.append(f"{where}: FailJob on {sorted(named.get('FailJob', set()))}, the fatal codes are {sorted(fatal)}")
            if drained not in named.get("Ignore", set()):
                bad.append(f"{where}: the drained code {drained} (SIGTERM) is not ignored")
            if not any(c.get("type") == "DisruptionTarget" for r in rules if r["action"] == "Ignore"
                       for c in r.get("onPodConditions", [])):
                bad.append(f"{where}: disruptions (DisruptionTarget) are counted as failures")
    return bad


def rule_probes_served(docs, _ctx):
    bad = []
    for d in docs:
        for where, spec in pod_templates(d):
            for c in spec.get("containers", []):
                ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
                numbers = set(ports.values())
                args = c.get("args", [])
                for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
                    probe = c.get(kind, {}).get("httpGet")
                    if not probe:
                        continue
                    port = ports.get(probe["port"], probe["port"]) if isinstance(probe["port"], str) else probe["port"]
                    if port not in numbers:
                        bad.append(f"{where}/{c['name']}: {kind}'s port {probe['port']} is not one of its ports")
                        continue
                    if c.get("command") != ["atoll"]:
                        continue
                    serving = [flag for flag in SERVED if (flag_value(args, flag) or "").endswith(f":{port}")]
                    if not serving:
                        bad.append(f"{where}/{c['name']}: {kind} asks port {port}, which no --health or --http serves")
                    elif probe["path"] not in SERVED[serving[0]]:
                        bad.append(f"{where}/{c['name']}: {kind} asks {probe['path']}, {serving[0]} serves "
                                   f"{sorted(SERVED[serving[0]])}")
    return bad


def rule_flags_known(docs, ctx):
    bad = []
    for d in docs:
        for where, spec in pod_templates(d):
            for c in atoll_containers(spec):
                args = c.get("args", [])
                if not args or args[0] not in ctx["help"]:
                    bad.append(f"{where}/{c['name']}: `atoll {args[0] if args else ''}` is no subcommand")
                    continue
                for a in args[1:]:
                    if a.startswith("--") and not re.search(rf"(^|\s){re.escape(a)}\b", ctx["help"][args[0]], re.M):
                        bad.append(f"{where}/{c['name']}: `atoll {args[0]}` has no flag {a}")
                env = {e["name"] for e in c.get("env", [])}
                for var in re.findall(r"\$\((\w+)\)", " ".join(args)):
                    if var not in env:
                        bad.append(f"{where}/{c['name']}: $({var}) in its args is not in its env")
    return bad


def rule_references(docs, _ctx):
    have = {(d["kind"], d["metadata"]["name"]) for d in docs}
    bad = []
    for d in docs:
        for where, spec in pod_templates(d):
            for v in spec.get("volumes", []):
                if "secret" in v and ("Secret", v["secret"]["secretName"]) not in have \
                        and v["secret"]["secretName"] not in USER_SECRETS:
                    bad.append(f"{where}: Secret {v['secret']['secretName']} is neither rendered nor one the user creates")
                if "configMap" in v and ("ConfigMap", v["configMap"]["name"]) not in have:
                    bad.append(f"{where}: ConfigMap {v['configMap']['name']} is not rendered")
    return bad


def rule_grace(docs, ctx):
    cluster = ctx["run"].get("cluster", {})
    need = cluster.get("handover_ms", 60000) / 1000 + 5 * cluster.get("heartbeat_ms", 1000) / 1000
    bad = []
    for d in docs:
        if d["kind"] != "JobSet":
            continue
        for where, spec in pod_templates(d):
            if spec.get("terminationGracePeriodSeconds", 30) < need:
                bad.append(f"{where}: terminationGracePeriodSeconds {spec.get('terminationGracePeriodSeconds', 30)} "
                           f"is under the hand-over's {need:.0f} s")
    return bad


RULES = [rule_restart_job_replicas, rule_name_lengths, rule_exit_codes, rule_probes_served, rule_flags_known,
         rule_references, rule_grace]


def check_rules(docs, ctx):
    return [p for rule in RULES for p in rule(docs, ctx)]


# ---- the self-check: each rule fails on the manifest broken the way it guards against ----

def node_container(docs):
    js = next(d for d in docs if d["kind"] == "JobSet")
    return js, js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0]


def mutations():
    """(what, function that breaks a copy of the rendered objects, the rule that must see it)."""
    def flag(docs):
        node_container(docs)[1]["args"].append("--heath")

    def env(docs):
        c = node_container(docs)[1]
        c["env"] = [e for e in c["env"] if e["name"] != "ATOLL_HEAD"]

    def port(docs):
        node_container(docs)[1]["livenessProbe"]["httpGet"]["port"] = "healthz"

    def path(docs):
        node_container(docs)[1]["readinessProbe"]["httpGet"]["path"] = "/ready"

    def health_port(docs):
        c = node_container(docs)[1]
        c["args"][c["args"].index("--health") + 1] = "tcp://0.0.0.0:9999"

    def exit_code(docs):
        js, _ = node_container(docs)
        js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][2]["onExitCodes"]["values"] = [2, 5]

    def drained(docs):
        js, _ = node_container(docs)
        del js["spec"]["replicatedJobs"][0]["template"]["spec"]["podFailurePolicy"]["rules"][1]

    def replicas(docs):
        node_container(docs)[0]["spec"]["replicatedJobs"][0]["replicas"] = 2000

    def long_name(docs):
        node_container(docs)[0]["metadata"]["name"] = "atoll-nodes-" + "x" * 60

    def secret(docs):
        spec = node_container(docs)[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        next(v for v in spec["volumes"] if "secret" in v)["secret"]["secretName"] = "atoll-keys"

    def grace(docs):
        spec = node_container(docs)[0]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
        spec["terminationGracePeriodSeconds"] = 30

    return [("a flag atoll join lacks", flag, rule_flags_known), ("an env var the args use, gone", env, rule_flags_known),
            ("a probe on a port the container lacks", port, rule_probes_served),
            ("a probe path the node does not serve", path, rule_probes_served),
            ("--health on another port than the probes'", health_port, rule_probes_served),
            ("an exit code atoll never produces", exit_code, rule_exit_codes),
            ("SIGTERM's drained code counted as a failure", drained, rule_exit_codes),
            ("2000 replicas with RestartJob", replicas, rule_restart_job_replicas),
            ("a JobSet name too long for its Jobs", long_name, rule_name_lengths),
            ("a Secret nobody creates", secret, rule_references),
            ("a grace shorter than the hand-over", grace, rule_grace)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--atoll", required=True)
    ap.add_argument("--npm-dir", required=True, help="where CMake installed tests/deploy/package.json's packages")
    ap.add_argument("--crd", default=os.path.join(ROOT, "..", "shared", "kubernetes", "jobset.x-k8s.io_jobsets.yaml"))
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    kubectl = shutil.which("kubectl")
    if not kubectl:
        print("SKIPPED: no kubectl on this machine (the manifests cannot be rendered)")
        sys.exit(77)
    os.makedirs(args.out, exist_ok=True)
    problems, rendered, all_docs = [], [], {}
    for k in kustomizations():
        name = os.path.relpath(k, KIT).replace("/", "-")
        r = subprocess.run([kubectl, "kustomize", k], capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            problems.append(f"kubectl kustomize {os.path.relpath(k, ROOT)}: {r.stderr.strip()}")
            continue
        path = os.path.join(args.out, f"{name}.yaml")
        open(path, "w").write(r.stdout)
        rendered.append(path)
        all_docs[name] = [d for d in yaml.safe_load_all(r.stdout) if d]
    print(f"rendered {len(rendered)} of {len(kustomizations())} kustomizations with {kubectl}")

    # Schemas, with the packages CMake installed (npm ci) beside the script.
    if not os.path.isdir(os.path.join(args.npm_dir, "node_modules")):
        problems.append(f"no node_modules in {args.npm_dir}: build first (CMake runs npm ci for tests/deploy)")
    else:
        shutil.copy(os.path.join(HERE, "validate_manifests.mjs"), args.npm_dir)
        r = subprocess.run(["node", os.path.join(args.npm_dir, "validate_manifests.mjs"), *rendered, "--crd", args.crd],
                           capture_output=True, text=True, timeout=120)
        try:
            report = json.loads(r.stdout.strip().splitlines()[-1])
        except (json.JSONDecodeError, IndexError):
            report = {"validated": [], "skipped": [], "errors": [f"validate_manifests.mjs: {r.stdout} {r.stderr}"]}
        problems += report["errors"]
        print(f"schemas: {len(report['validated'])} objects valid, {len(report['errors'])} errors")
        for s in report["skipped"]:
            print(f"skipped: {s}")

    ctx = {"exit_codes": exit_codes_produced(),
           "run": tomllib.load(open(os.path.join(KIT, "base", "head", "run.toml"), "rb")),
           "help": {sub: subprocess.run([args.atoll, sub, "--help"], capture_output=True, text=True).stdout
                    for sub in ("up", "join")}}
    for name, docs in all_docs.items():
        problems += [f"{name}: {p}" for p in check_rules(docs, ctx)]
    print(f"rules: {len(RULES)} rules over {sum(len(d) for d in all_docs.values())} objects")

    # The self-check, on the cpu overlay: clean, then each breakage seen by its rule.
    base = all_docs.get("overlays-cpu")
    if base is None:
        problems.append("no overlays/cpu to check the rules against")
    else:
        for what, breaks, rule in mutations():
            broken = copy.deepcopy(base)
            breaks(broken)
            if not rule(broken, ctx):
                problems.append(f"self-check: {rule.__name__} does not see {what}")
        print(f"self-check: {len(mutations())} broken manifests, each seen by its rule")

    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("ok: every overlay renders, validates and keeps the contract")


if __name__ == "__main__":
    main()
