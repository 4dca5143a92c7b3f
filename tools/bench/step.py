#!/usr/bin/python3
"""The inner step three ways, in one run: `./tools/dev bench step [--out DIR]`.

  bare     atoll_step_bench: the task's replica stepped in a plain C++ loop (no actors,
           no network): the runtime's overhead is measured against it.
  atoll    the worker inside `atoll local --nodes 1`, with no round and no evaluation in
           the measured window, sampling its shard (run.data_cursor = false).
  pytorch  the same GPT in PyTorch eager (Debian's python3-torch: the same LibTorch and
           OpenBLAS), same architecture, initialisation, batch, AdamW, clipping and schedule;
           once as a user runs it (torch.set_num_threads only: env "default") and once
           with the thread settings Atoll applies to its own workers (env "atoll").
  With --cursor, the bare and atoll ways also with the data cursor (env "cursor"; the
  worker's default): steps take their units from leases instead of sampling the shard, and
  the bare loop reports that work's own time a step (feed_us_per_step).

Each way runs in its own process at 1 and 2 threads. Between step `--skip` and
step `--steps` this script samples /proc of the process that trains: wall seconds per
step, CPU seconds per step (all its threads), and every thread that used more than 5% of
a core. For atoll, the head's and the launcher's CPU are reported apart.

Every configuration runs --repeat times, interleaved; the fastest repeat is reported
(all repeats' s/step are kept in results.json). The atoll worker picks its own thread
layout (runtime/core/thread_layout.hpp) over its first 29 steps, before the window; its choice
is reported. Last, "best against best": the fastest Atoll worker against the fastest
PyTorch eager as a user runs it, whatever the threads of each. Writes DIR/results.json
({"runs": [{way, threads, env, s_per_step, cpu_s_per_step, ...}], "best_against_best":
{...}}) and DIR/table.md.
"""
import argparse
import json
import os
import subprocess
import sys
import time

from benchlib import provenance  # tools/bench/benchlib, next to this script

CLK_TCK = os.sysconf("SC_CLK_TCK")
HOT_SHARE = 0.05  # threads above this share of one core are listed

# The default shakespeare GPT (runtime/process/config.hpp defaults).
LAYERS, WIDTH, HEADS, CONTEXT, BATCH = 4, 128, 4, 64, 32
LR, WARMUP, MIN_LR_RATIO, WD, CLIP, SEED = 3e-3, 50, 0.1, 0.1, 1.0, 1


# ---------------------------------------------------------------------------- /proc


def cpu_ticks(stat_line):
    """utime + stime from a /proc/.../stat line (fields after the parenthesised name)."""
    fields = stat_line[stat_line.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def sys_ticks(stat_line):
    return int(stat_line[stat_line.rindex(")") + 2:].split()[12])


def snapshot(pid):
    """Wall time, the process's CPU seconds, and {tid: (name, cpu seconds)} of its threads."""
    now = time.monotonic()
    with open(f"/proc/{pid}/stat") as f:
        line = f.read()
    total, system = cpu_ticks(line) / CLK_TCK, sys_ticks(line) / CLK_TCK
    threads = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                line = f.read()
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:  # the thread ended between listdir and open
            continue
        threads[int(tid)] = (name, cpu_ticks(line) / CLK_TCK)
    return {"wall": now, "cpu": total, "sys": system, "threads": threads}


def window(a, b, steps):
    """Per-step figures between two snapshots of the same process `steps` steps apart."""
    wall = b["wall"] - a["wall"]
    hot = []
    for tid, (name, cpu) in b["threads"].items():
        share = (cpu - a["threads"].get(tid, (name, 0.0))[1]) / wall
        if share > HOT_SHARE:
            hot.append({"tid": tid, "name": name, "cpu_share": round(share, 3)})
    hot.sort(key=lambda t: -t["cpu_share"])
    return {"s_per_step": wall / steps, "cpu_s_per_step": (b["cpu"] - a["cpu"]) / steps,
            "sys_s_per_step": (b["sys"] - a["sys"]) / steps, "hot_threads": hot}


def measure_lines(proc, skip, steps):
    """A child that prints "step N" after each step: snapshots at steps skip and steps. A
    line ending "feed_us U" (the bare loop with --cursor) adds the median of U over the
    window as feed_us_per_step."""
    first, feed_us = None, []
    for line in proc.stdout:
        if not line.startswith("step "):
            continue
        words = line.split()
        n = int(words[1])
        if skip < n <= steps and "feed_us" in words:
            feed_us.append(float(words[words.index("feed_us") + 1]))
        if n == skip:
            first = snapshot(proc.pid)
        elif n == steps:
            result = window(first, snapshot(proc.pid), steps - skip)
            if feed_us:
                result["feed_us_per_step"] = sorted(feed_us)[len(feed_us) // 2]
            proc.wait()
            return result
    proc.wait()
    raise SystemExit(f"bench step: {proc.args[0]} ended before step {steps} (exit {proc.returncode})")


# ---------------------------------------------------------------------------- the three ways


def run_bare(build, threads, skip, steps, cursor=False):
    cmd = [os.path.join(build, "tools", "atoll_step_bench"), "--threads", str(threads), "--steps", str(steps)]
    if cursor:
        cmd.append("--cursor")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    return measure_lines(proc, skip, steps)


# What Atoll sets for a process that trains: the BLAS pool bound to the thread budget
# (training/devices.cpp) and short spins for idle threads (runtime/device/compute_env.hpp).
TUNING = ["OPENBLAS_NUM_THREADS", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OPENBLAS_THREAD_TIMEOUT"]


def run_pytorch(threads, skip, steps, atoll_env):
    """torch.set_num_threads(threads), as a user writes it; with atoll_env, also the
    settings Atoll applies to its own workers, so the two differ only in the language."""
    cmd = [sys.executable, os.path.abspath(__file__), "--pytorch-child", "--threads", str(threads),
           "--steps", str(steps)]
    env = {k: v for k, v in os.environ.items() if k not in TUNING}
    if atoll_env:
        env.update(OPENBLAS_NUM_THREADS=str(threads), GOMP_SPINCOUNT="10000", OPENBLAS_THREAD_TIMEOUT="4")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    return measure_lines(proc, skip, steps)


def children_of(pid):
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                line = f.read()
            with open(f"/proc/{entry}/cmdline") as f:
                argv = f.read().split("\0")
        except OSError:
            continue
        if int(line[line.rindex(")") + 2:].split()[1]) == pid:
            kids.append((int(entry), argv))
    return kids


def run_atoll(build, out, threads, skip, steps, sets=()):
    run_dir = os.path.join(out, f"atoll-{threads}t" + ("-" + "-".join(s.split("=")[0] for s in sets) if sets else ""))
    subprocess.run(["rm", "-rf", run_dir], check=True)
    # No round and no evaluation in the run (sync_every and eval_every beyond its end);
    # the run's own steps are a few more than the window so the end is not in it.
    total = steps + 20
    cmd = [os.path.join(build, "tools", "atoll"), "local", "--nodes", "1", "--run-dir", run_dir,
           "--set", f"run.steps={total}", "--set", "run.min_workers=1",
           "--set", f"run.threads_per_worker={threads}", "--set", f"diloco.sync_every={10 * total}",
           "--set", f"run.eval_every={10 * total}"]
    for s in sets:
        cmd += ["--set", s]
    launcher = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    metrics = os.path.join(run_dir, "metrics.jsonl")
    node = head = None
    layout = ""  # the worker's thread layout, as its progress reports give it
    first = last = None
    seen, offset = 0, 0
    deadline = time.monotonic() + 600
    while last is None:
        if launcher.poll() is not None or time.monotonic() > deadline:
            launcher.kill()
            raise SystemExit(f"bench step: atoll local ended or stalled before step {steps}; see {run_dir}/logs")
        if node is None:
            for pid, argv in children_of(launcher.pid):
                if "join" in argv:
                    node = pid
                elif "up" in argv:
                    head = pid
        if os.path.exists(metrics):
            with open(metrics) as f:
                f.seek(offset)
                chunk = f.read()
            # Only whole lines; a partly written one is read again next time.
            complete = chunk[: chunk.rfind("\n") + 1]
            offset += len(complete.encode())
            for line in complete.splitlines():
                rec = json.loads(line)
                if rec.get("type") == "step":
                    seen = max(seen, rec["step"])
                    layout = rec.get("threads", layout)
        if first is None and seen >= skip:
            first = (seen, snapshot(node), snapshot(head), snapshot(launcher.pid))
        elif first is not None and seen >= steps:
            last = (seen, snapshot(node), snapshot(head), snapshot(launcher.pid))
        time.sleep(0.005)
    launcher.wait()
    n = last[0] - first[0]
    result = window(first[1], last[1], n)
    result["head_cpu_s_per_step"] = (last[2]["cpu"] - first[2]["cpu"]) / n
    result["launcher_cpu_s_per_step"] = (last[3]["cpu"] - first[3]["cpu"]) / n
    result["layout"] = layout
    return result


# ---------------------------------------------------------------------------- PyTorch eager


def pytorch_child(threads, steps):
    import torch
    import torch.nn.functional as F
    from torch_gpt import GPT, lr_at

    torch.set_num_threads(threads)
    torch.manual_seed(SEED)
    model = GPT(LAYERS, WIDTH, HEADS, CONTEXT)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.95), eps=1e-8, weight_decay=WD)
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    with open(os.path.join(root, "examples", "data", "tinyshakespeare.txt"), "rb") as f:
        data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8).long()
    train = data[: len(data) * 9 // 10].clone()
    gen = torch.Generator().manual_seed(SEED)

    model.train()
    print("ready", flush=True)
    for step in range(steps):
        starts = torch.randint(0, len(train) - CONTEXT - 1, (BATCH,), generator=gen)
        w = torch.stack([train[s : s + CONTEXT + 1] for s in starts.tolist()])
        for g in opt.param_groups:
            g["lr"] = lr_at(step, steps, LR, WARMUP, MIN_LR_RATIO)
        opt.zero_grad()
        loss = F.cross_entropy(model(w[:, :CONTEXT]).view(-1, 256), w[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        print(f"step {step + 1} loss {loss.item():.4f}", flush=True)


# ---------------------------------------------------------------------------- report


def table(results):
    by = {(r["way"], r["threads"], r["env"]): r for r in results}
    lines = ["| threads | way | env | s / step | CPU s / step | CPU / wall | steps/s vs PyTorch "
             "(env default / atoll) | vs bare | threads over 5% of a core | s / step of each repeat |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        eager = [by.get(("pytorch", r["threads"], e)) for e in ("default", "atoll")]
        bare = by.get(("bare", r["threads"], "atoll"))
        speed = " / ".join(f"{e['s_per_step'] / r['s_per_step']:.2f}x" if e else "-" for e in eager)
        hot = ", ".join(f"{t['name']} {t['cpu_share']:.0%}" for t in r["hot_threads"])
        lines.append(f"| {r['threads']} | {r['way']} | {r['env']} | {r['s_per_step']:.4f} | "
                     f"{r['cpu_s_per_step']:.4f} | {r['cpu_s_per_step'] / r['s_per_step']:.2f} | {speed} | "
                     f"{bare['s_per_step'] / r['s_per_step']:.3f}x | {hot} | "
                     f"{', '.join(f'{x:.3f}' for x in r['repeats_s_per_step'])} |")
    return "\n".join(lines)


def best_against_best(results):
    """The fastest Atoll worker against the fastest PyTorch eager run as a user runs it
    (torch.set_num_threads only, BLAS as PyTorch leaves it), whatever their threads."""
    atoll = [r for r in results if r["way"] == "atoll" and r["env"] == "atoll"]
    eager = [r for r in results if r["way"] == "pytorch" and r["env"] == "default"]
    if not atoll or not eager:
        return None
    a = min(atoll, key=lambda r: r["s_per_step"])
    e = min(eager, key=lambda r: r["s_per_step"])
    return {"atoll_threads": a["threads"], "atoll_layout": a.get("layout", ""), "atoll_s_per_step": a["s_per_step"],
            "pytorch_threads": e["threads"], "pytorch_s_per_step": e["s_per_step"],
            "speedup": e["s_per_step"] / a["s_per_step"]}


def best_table(best):
    return ("| best against best | Atoll worker | PyTorch eager (as a user runs it) | Atoll speed-up |\n"
            "|---|---|---|---|\n"
            f"| s / step | {best['atoll_s_per_step']:.4f} ({best['atoll_threads']} thread(s), layout "
            f"{best['atoll_layout'] or '-'}) | {best['pytorch_s_per_step']:.4f} ({best['pytorch_threads']} thread(s)) | "
            f"{best['speedup']:.2f}x |")


def markdown(data):
    """Every run's table, the data cursor's share, and best against best, from results.json
    (tools/bench/report.py step DIR)."""
    results, best = data["runs"], data.get("best_against_best")
    text = table(results)
    for r in results:
        if r.get("feed_us_per_step") is not None:
            text += (f"\n\nThe data cursor's own work in a step of the bare loop at {r['threads']} thread(s): "
                     f"{r['feed_us_per_step']:.1f} us (median), {100 * r['feed_us_per_step'] * 1e-6 / r['s_per_step']:.4f}% "
                     f"of its {r['s_per_step']:.4f} s step")
    if best:
        text += "\n\n" + best_table(best)
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="the CMake build folder")
    ap.add_argument("--out", default="bench-step")
    ap.add_argument("--steps", type=int, default=180, help="last step of the measured window")
    ap.add_argument("--skip", type=int, default=30, help="steps before the window (warm-up)")
    ap.add_argument("--threads", default="1,2", help="LibTorch threads per worker, comma-separated")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each configuration; the fastest is kept")
    ap.add_argument("--cursor", action="store_true",
                    help="also the Atoll worker with run.data_cursor (env \"cursor\"): the data cursor's cost a step")
    ap.add_argument("--pytorch-child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.pytorch_child:
        return pytorch_child(int(args.threads), args.steps)
    if not 0 < args.skip < args.steps:
        ap.error("need 0 < --skip < --steps")
    try:
        import torch  # noqa: F401  (the pytorch way needs it; say so before anything runs)
    except ImportError:
        raise SystemExit("bench step: python3-torch is missing (apt-get install python3-torch)")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "step")  # run.json: command, date, machine, revision
    # env "atoll": the thread settings Atoll applies to a process that trains; "default":
    # PyTorch's own (its BLAS pool keeps one thread per core, idle threads spin long).
    ways = [("bare", "atoll"), ("atoll", "atoll"), ("pytorch", "default"), ("pytorch", "atoll")]
    if args.cursor:
        ways.insert(1, ("bare", "cursor"))
        ways.insert(3, ("atoll", "cursor"))
    configs = [(threads, way, env) for threads in [int(t) for t in args.threads.split(",")] for way, env in ways]
    # Repeats are interleaved (every configuration once, then again), so a slow spell of a
    # shared machine does not fall on one configuration; each keeps its fastest repeat.
    runs = {c: [] for c in configs}
    for repeat in range(args.repeat):
        for threads, way, env in configs:
            print(f"bench step: {way} (env {env}), {threads} thread(s), steps {args.skip}..{args.steps}, "
                  f"repeat {repeat + 1} of {args.repeat}", flush=True)
            if way == "bare":
                r = run_bare(args.build, threads, args.skip, args.steps, env == "cursor")
            elif way == "atoll":
                r = run_atoll(args.build, args.out, threads, args.skip, args.steps,
                              [f"run.data_cursor={'true' if env == 'cursor' else 'false'}"])
            else:
                r = run_pytorch(threads, args.skip, args.steps, env == "atoll")
            print("  " + json.dumps(r), flush=True)
            runs[(threads, way, env)].append(r)
    results = []
    for (threads, way, env), rs in runs.items():
        best = min(rs, key=lambda r: r["s_per_step"])
        results.append({"way": way, "threads": threads, "env": env, **best,
                        "repeats_s_per_step": [round(r["s_per_step"], 4) for r in rs]})
    best = best_against_best(results)
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump({"runs": results, "best_against_best": best}, f, indent=1)
    text = markdown({"runs": results, "best_against_best": best})
    with open(os.path.join(args.out, "table.md"), "w") as f:
        f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
