#!/usr/bin/env python3
"""Renders a bench's table as Markdown from its results, with where they come from.

  tools/bench/report.py scale DIR [DIR ...]     the scale bench's rows; several runs of the same
                                                rows: the median and the range of each figure
  tools/bench/report.py stragglers DIR          the stragglers bench's rows against their bound
  tools/bench/report.py BENCH DIR               any other bench: its own table (the bench's
                                                markdown(), from the results file it wrote)

Each DIR is a bench's --out folder: its results file and run.json (command, date, machine,
revision: tools/bench/benchlib/provenance.py). The README's and docs' tables are pasted from
this output, never typed by hand (`./tools/dev bench report NAME DIR...`).
"""
import importlib
import json
import os
import statistics
import sys

# A bench's name -> its harness (tools/bench/MODULE.py, which has markdown(data)) and results file.
OWN_TABLES = {
    "averaging": ("averaging", "results.json"),
    "chaos": ("chaos", "summary.json"),
    "codecs": ("codec_speed", "results.json"),
    "links": ("links", "summary.json"),
    "own-model": ("own_model", "own_model.json"),
    "python": ("python_api", "results.json"),
    "quality": ("quality", "results.json"),
    "step": ("step", "results.json"),
    "warm-join": ("warm_join", "results.json"),
}


def load(d, results="results.json"):
    with open(os.path.join(d, results)) as f:
        rows = json.load(f)
    try:
        with open(os.path.join(d, "run.json")) as f:
            run = json.load(f)
    except FileNotFoundError:
        run = {"command": "?", "date": "?", "machine": "?", "revision": "?"}
    return rows, run


def provenance_line(runs):
    first = runs[0]
    dates = sorted({r["date"] for r in runs})
    revisions = sorted({r["revision"] for r in runs})
    return (f"`{first['command']}`" + (f", {len(runs)} runs" if len(runs) > 1 else "") +
            f"; {', '.join(dates)}; {first['machine']}; revision {', '.join(revisions)}")


def figure(values, fmt):
    values = [v for v in values if v is not None]
    if not values:
        return ""
    mid = format(statistics.median(values), fmt)
    if len(values) == 1 or min(values) == max(values):
        return mid
    return f"{mid} ({format(min(values), fmt)} to {format(max(values), fmt)})"


def scale(dirs):
    loaded = [load(d) for d in dirs]
    print(provenance_line([run for _, run in loaded]))
    print()
    print("| nodes | churn | head CPU (cores) | head RSS MB | head in, out B/node/s | join s median | kill s "
          "| silence s | leave s | `status` s | largest envelope |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    keys = sorted({(r["nodes"], r["churn"], r.get("registry", "embedded")) for rows, _ in loaded for r in rows})
    for nodes, churn, registry in keys:
        same = [r for rows, _ in loaded for r in rows
                if (r["nodes"], r["churn"], r.get("registry", "embedded")) == (nodes, churn, registry)]
        get = lambda k, fmt: figure([r.get(k) for r in same], fmt)
        largest = {}
        for r in same:
            for kind, size in r.get("largest_envelope", {}).items():
                largest[kind] = max(largest.get(kind, 0), size)
        big = max(largest.items(), key=lambda kv: kv[1]) if largest else None
        print(f"| {nodes}{'' if registry == 'embedded' else ', ' + registry} | {'yes' if churn else 'no'} | "
              f"{get('head_cpu', '.3f')} | {get('head_rss_mb', '.0f')} | "
              f"{get('control_bytes_per_node_s_in', '.0f')}, {get('control_bytes_per_node_s_out', '.0f')} | "
              f"{get('join_s_median', '.2f')} | {get('kill_s_median', '.2f')} | {get('silence_s_median', '.2f')} | "
              f"{get('leave_s_median', '.3f')} | {get('status_s', '.3f')} | "
              f"{f'{big[0]} {big[1] / 1024:.0f} KB' if big else ''} |")


def stragglers(dirs):
    rows, run = load(dirs[0])
    print(provenance_line([run]))
    print()
    print("| row | goodput, samples/s | of the bound | committed / trained samples | held-out loss | wall s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        bound = r.get("bound_samples_s")
        share = f"{r['goodput_samples_s'] / bound:.2f}" if bound else ""
        ratio = f"{r['samples'] / r['trained']:.2f}" if r.get("trained") else ""
        loss = "" if r.get("held_out_loss") is None else f"{r['held_out_loss']:.3f}"
        print(f"| {r['name']} | {r['goodput_samples_s']:,.0f} | {share} | {ratio} | {loss} | {r['wall_s']} |")


def own_table(bench, dirs):
    """The bench's own table of each DIR's results, each under where it comes from."""
    module, results = OWN_TABLES[bench]
    markdown = importlib.import_module(module).markdown
    for i, d in enumerate(dirs):
        data, run = load(d, results)
        print(("\n" if i else "") + provenance_line([run]) + "\n")
        print(markdown(data))


def main():
    benches = {"scale": scale, "stragglers": stragglers}
    names = sorted(list(benches) + list(OWN_TABLES))
    if len(sys.argv) < 3 or sys.argv[1] not in names:
        sys.exit(f"usage: report.py {{{','.join(names)}}} DIR [DIR ...]")
    missing = [d for d in sys.argv[2:] if not os.path.isdir(d)]
    if missing:
        sys.exit(f"report.py: no results folder {', '.join(missing)} (run ./tools/dev bench {sys.argv[1]} first)")
    if sys.argv[1] in benches:
        benches[sys.argv[1]](sys.argv[2:])
    else:
        own_table(sys.argv[1], sys.argv[2:])


if __name__ == "__main__":
    main()
