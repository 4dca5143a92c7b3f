#!/usr/bin/env python3
"""Codec throughput: encode and decode of one fragment in every codec, and the frame checksum,
against a memcpy of the same fp32 bytes measured in the same run (build/tools/atoll_codec_bench,
Google Benchmark), as rows in results.json and a table (`./tools/dev bench codecs`).

  codec_speed.py --bench build/tools/atoll_codec_bench --out DIR [--min-time 0.5] [--filter REGEX]

DIR/results.json: one row per operation and size: op (encode, decode, checksum, memcpy),
codec ("" for checksum and memcpy), values, ms (wall time per call), gbps (fp32 GB a second of wall time),
memcpy_ms (the memcpy of the same size) and of_memcpy (ms / memcpy_ms). DIR/raw.json is
Google Benchmark's own output. Exits 1 when the binary fails, reports an error, or measures no
memcpy to compare with.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import provenance  # tools/bench/benchlib, next to this script

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}


def rows_of(raw):
    """Google Benchmark's JSON -> rows (see the module's docstring). Names are OP[/CODEC]/VALUES:
    "baseline_memcpy/834048", "checksum/834048", "encode/int8/834048"."""
    measured = []
    for b in raw.get("benchmarks", []):
        if b.get("run_type", "iteration") != "iteration":
            continue  # aggregates of --benchmark_repetitions: the runs themselves are kept
        if b.get("error_occurred"):
            raise SystemExit(f"codecs: {b['name']} failed: {b.get('error_message', '?')}")
        parts = b["name"].split("/")
        op = "memcpy" if parts[0] == "baseline_memcpy" else parts[0]
        codec = parts[1] if len(parts) == 3 else ""
        ms = b["real_time"] * UNIT_MS[b.get("time_unit", "ns")]
        values = int(parts[-1])
        # From the wall time: Google Benchmark's bytes_per_second divides by the calling
        # thread's CPU time, which misses the threads an 8M-value encode runs on.
        measured.append({"op": op, "codec": codec, "values": values, "ms": ms, "gbps": values * 4 / (ms * 1e6)})
    memcpy = {r["values"]: r["ms"] for r in measured if r["op"] == "memcpy"}
    for r in measured:
        if r["values"] not in memcpy:
            raise SystemExit(f"codecs: no memcpy of {r['values']} values measured beside {r['op']} {r['codec']}")
        r["memcpy_ms"] = memcpy[r["values"]]
        r["of_memcpy"] = r["ms"] / memcpy[r["values"]]
    if not measured:
        raise SystemExit("codecs: the bench measured nothing (a --filter that matches no benchmark?)")
    return measured


def markdown(rows):
    """One line per codec and size: encode and decode against the memcpy of the same bytes."""
    sizes = sorted({r["values"] for r in rows})
    by = {(r["op"], r["codec"], r["values"]): r for r in rows}
    codecs = [c for c in ("bf16", "fp16", "int8", "fp4") if any(r["codec"] == c for r in rows)]
    lines = ["| values | what | encode ms | encode GB/s | decode ms | decode GB/s | memcpy ms | encode / memcpy |",
             "|---|---|---|---|---|---|---|---|"]
    for n in sizes:
        memcpy = by.get(("memcpy", "", n))
        lines.append(f"| {n:,} | memcpy (baseline) | | | | | {memcpy['ms']:.3f} | 1.0x |")
        if ("checksum", "", n) in by:
            c = by[("checksum", "", n)]
            lines.append(f"| {n:,} | checksum (digest64) | {c['ms']:.3f} | {c['gbps']:.2f} | | | "
                         f"{memcpy['ms']:.3f} | {c['of_memcpy']:.1f}x |")
        for codec in codecs:
            enc, dec = by.get(("encode", codec, n)), by.get(("decode", codec, n))
            cell = lambda r, k, fmt: format(r[k], fmt) if r else ""
            lines.append(f"| {n:,} | {codec} | {cell(enc, 'ms', '.3f')} | {cell(enc, 'gbps', '.2f')} | "
                         f"{cell(dec, 'ms', '.3f')} | {cell(dec, 'gbps', '.2f')} | {memcpy['ms']:.3f} | "
                         f"{(cell(enc, 'of_memcpy', '.1f') + 'x') if enc else ''} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bench", default="build/tools/atoll_codec_bench", help="the atoll_codec_bench binary")
    ap.add_argument("--out", default="build/bench/codecs")
    ap.add_argument("--min-time", type=float, default=0.5, help="seconds each benchmark runs at least")
    ap.add_argument("--filter", default="", help="a regular expression of the benchmarks to run (the memcpy always runs)")
    args = ap.parse_args()
    if not os.access(args.bench, os.X_OK):
        raise SystemExit(f"codecs: no bench binary at {args.bench} (build the atoll_codec_bench target)")
    os.makedirs(args.out, exist_ok=True)
    provenance.write(args.out, "codecs")
    raw_path = os.path.join(args.out, "raw.json")
    command = [args.bench, f"--benchmark_out={raw_path}", "--benchmark_out_format=json",
               f"--benchmark_min_time={args.min_time}"]
    if args.filter:
        command.append(f"--benchmark_filter=baseline_memcpy|{args.filter}")
    done = subprocess.run(command, stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        raise SystemExit(f"codecs: {args.bench} exited {done.returncode}")
    with open(raw_path) as f:
        rows = rows_of(json.load(f))
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(markdown(rows))


if __name__ == "__main__":
    main()
