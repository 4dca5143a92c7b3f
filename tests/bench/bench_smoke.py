#!/usr/bin/env python3
"""A benchmark at its smallest size, checked (`ctest -R Bench`): it must exit 0 (each bench
fails a row that breaks an invariant of its own, such as committed samples above trained),
and its results file must hold every documented field in every row, every number finite and,
unless named as signed, non-negative.

  bench_smoke.py RESULTS FIELDS [--signed F1,F2] [--rows-key KEY] [--below F=V,...] [--zero F1,F2]
                 -- COMMAND...

RESULTS: the results file COMMAND writes (removed first, so a stale one cannot pass);
FIELDS: comma-separated, each row must have them; --rows-key: the rows are RESULTS[KEY]
(e.g. "runs") rather than the file itself; --below: each row's F under V (a loss under the
untrained model's); --zero: each row's F is 0 (rounds lost, invariants broken).
"""
import json
import math
import os
import subprocess
import sys


def numbers(value, path):
    """Every number under `value`, with its path."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from numbers(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numbers(v, f"{path}[{i}]")


def check_rows(rows, fields, signed=(), below=None, zero=()):
    """What is wrong with a bench's rows, as sentences; [] when nothing is."""
    problems = []
    if not rows:
        problems.append("no rows")
    for i, row in enumerate(rows):
        name = row.get("name", row.get("way", i)) if isinstance(row, dict) else i
        problems += [f"row {name}: no {f}" for f in fields if f not in row]
        problems += [f"row {name}: {f} = {row.get(f)}, not under {v}" for f, v in (below or {}).items()
                     if not isinstance(row.get(f), (int, float)) or row[f] >= float(v)]
        problems += [f"row {name}: {f} = {row.get(f)}, not 0" for f in zero if row.get(f) != 0]
        for path, v in numbers(row, ""):
            if not math.isfinite(v):
                problems.append(f"row {name}: {path} = {v}")
            elif v < 0 and path.lstrip(".").split(".")[0].split("[")[0] not in signed:
                problems.append(f"row {name}: {path} = {v} is negative")
    return problems


def main():
    if "--" not in sys.argv:
        sys.exit(__doc__)
    split = sys.argv.index("--")
    ours, command = sys.argv[1:split], sys.argv[split + 1:]
    results, fields = ours[0], [f for f in ours[1].split(",") if f]
    signed = set(ours[ours.index("--signed") + 1].split(",")) if "--signed" in ours else set()
    rows_key = ours[ours.index("--rows-key") + 1] if "--rows-key" in ours else None
    below = dict(kv.split("=") for kv in ours[ours.index("--below") + 1].split(",")) if "--below" in ours else {}
    zero = ours[ours.index("--zero") + 1].split(",") if "--zero" in ours else []
    if os.path.exists(results):
        os.remove(results)
    done = subprocess.run(command)
    if done.returncode != 0:
        sys.exit(f"bench_smoke: the bench exited {done.returncode}")
    with open(results) as f:
        data = json.load(f)
    rows = data[rows_key] if rows_key else data
    rows = rows if isinstance(rows, list) else [rows]
    problems = check_rows(rows, fields, signed, below, zero)
    if problems:
        sys.exit("bench_smoke: " + "; ".join(problems))
    print(f"bench_smoke: {len(rows)} row(s), every field present, every number finite")


if __name__ == "__main__":
    main()
