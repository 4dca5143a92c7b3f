#!/usr/bin/env python3
"""Each benchmark's checks fail on the bug they are there for (issue 68): a smoke test that
could not fail would prove nothing. Table-driven: for every `./tools/dev bench` verb, a row as
the bench writes it when all is well (passes) and the same row with the bug it guards against
(fails). The stragglers and scale rows are the ones the issue reported: committed samples three
times those trained (a round counted once per slice), and a dead head's negative counters."""
import os
import re
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "tools", "bench"))

import bench_smoke  # noqa: E402  tests/bench/bench_smoke.py
import scale  # noqa: E402  tools/bench/scale.py
import stragglers  # noqa: E402  tools/bench/stragglers.py


def broken(row, **changes):
    """row with `changes`; a value None removes the field."""
    out = dict(row)
    for key, value in changes.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def smoke_arguments():
    """Each smoke test's checks as tests/CMakeLists.txt gives them to bench_smoke.py: bench ->
    (fields, signed, below, zero), read from the file so that this test checks what CI runs."""
    text = open(os.path.join(HERE, "..", "CMakeLists.txt")).read()
    found = {}
    for args in re.findall(r"COMMAND \$\{bench_smoke\}(.*?) --\s", text, re.S):
        tokens = args.split()
        bench = tokens[0].split("/")[1]  # ${bench_out}/BENCH/results.json
        option = lambda name: tokens[tokens.index(name) + 1] if name in tokens else ""
        found[bench] = (tokens[1].split(","), set(filter(None, option("--signed").split(","))),
                        dict(kv.split("=") for kv in filter(None, option("--below").split(","))),
                        list(filter(None, option("--zero").split(","))))
    return found


# For each bench smoke-tested through bench_smoke.py: a good row, and the broken rows its
# check must refuse, each with what broke.
SMOKE = {
    "averaging": ({"size_mb": 1, "workers": 2, "codec": "int8", "shards": "auto", "atoll_gbps": 0.4,
                   "gloo_gbps": 1.1, "tcp_bound_gbps": 9.0, "atoll_round_s": 0.05, "commit_bytes_per_keeper": 524288,
                   "cpu_s_per_round": 0.08, "gloo_cpu_s": 0.02, "keeper_bytes_per_node": 270000},
                  [("a counter that went backwards", {"commit_bytes_per_keeper": -4096}),
                   ("a round that never closed", {"atoll_round_s": float("inf")}),
                   ("the baseline not measured", {"gloo_gbps": None}),
                   ("Gloo's CPU not measured", {"gloo_cpu_s": None}),
                   ("CPU read from processes that were gone", {"cpu_s_per_round": -0.3})]),
    "step": ({"way": "atoll", "threads": 1, "s_per_step": 0.11, "cpu_s_per_step": 0.11},
             [("no step timed", {"s_per_step": float("nan")}), ("no CPU read", {"cpu_s_per_step": None})]),
    "warm_join": ({"name": "warm-seed1", "warm": True, "seed": 1, "steps": 60, "joined_at_step": 30, "val_loss": 2.4,
                   "joiner_excess_first_50": -0.01},
                  [("a diverged run", {"val_loss": float("nan")}), ("no evaluation", {"val_loss": None})]),
    "quality": ({"name": "ddp", "val_loss": 2.9, "bytes_sent_per_worker": 1e6, "wall_s": 30},
                [("a model that did not learn", {"val_loss": 5.6}), ("a negative byte count", {"bytes_sent_per_worker": -1})]),
    "own_model": ({"steps": 40, "sync_every": 10, "atoll": {"val_loss": 3.1}, "pytorch": {"val_loss": 3.0}},
                  [("the PyTorch baseline missing", {"pytorch": None}), ("a NaN loss", {"atoll": {"val_loss": float("nan")}})]),
    "python": ({"plain": {"s_per_step": 0.01}, "atoll": {"s_per_step": 0.011}, "handoff_s": 0.002,
                "between_syncs": -0.01, "whole_run": 0.05},
               [("a hand-off timed backwards", {"handoff_s": -0.002}), ("the plain loop missing", {"plain": None})]),
    "chaos": ({"rounds_committed": 40, "rounds_lost": 0, "invariant_violations": 0},
              [("a committed round lost", {"rounds_lost": 1}), ("an invariant broken", {"invariant_violations": 2})]),
    "codecs": ({"op": "encode", "codec": "int8", "values": 834048, "ms": 1.8, "gbps": 1.85, "memcpy_ms": 0.09,
                "of_memcpy": 20.0},
               [("the memcpy baseline missing", {"memcpy_ms": None}), ("an encode timed backwards", {"ms": -1.8})]),
    "links": ({"name": "diloco-sharded", "link_mbit": 100, "wall_s": 20.0, "compute_utilisation": 0.97,
               "val_loss": 2.8, "head_link_bytes": 600000},
              [("a link counter that wrapped", {"head_link_bytes": -161}), ("no utilisation", {"compute_utilisation": None})]),
}

STRAGGLERS_GOOD = {"name": "time-boxed", "wall_s": 60.0, "rounds": 12, "samples": 6_100_000, "trained": 6_127_616,
                   "goodput_samples_s": 101_666.7, "bound_samples_s": 102_269}
SCALE_GOOD = {"nodes": 1000, "churn": False, "joined": 1000, "actor_deaths": 0, "head_cpu": 0.11, "harness_cpu": 1.2,
              "control_bytes_per_node_s_in": 120.0, "control_bytes_per_node_s_out": 300.0, "rounds_per_s": 0.5,
              "epochs": 1, "status_s": 0.02, "head_rss_mb": 300.0, "ramp_s": 9.0}


class EachBenchsCheckFailsOnItsBug(unittest.TestCase):
    def test_the_smoke_checks(self):
        arguments = smoke_arguments()
        self.assertEqual(sorted(arguments), sorted(SMOKE), "a bench smoke-tested without rows here, or the reverse")
        for bench, (good, bugs) in SMOKE.items():
            fields, signed, below, zero = arguments[bench]
            with self.subTest(bench=bench, row="good"):
                self.assertEqual(bench_smoke.check_rows([good], fields, signed, below, zero), [])
            for what, changes in bugs:
                with self.subTest(bench=bench, bug=what):
                    self.assertNotEqual(bench_smoke.check_rows([broken(good, **changes)], fields, signed, below, zero),
                                        [], what)
        self.assertNotEqual(bench_smoke.check_rows([], ("name",)), [], "a results file without rows")

    def test_stragglers_refuses_more_committed_than_trained_and_goodput_above_its_bound(self):
        stragglers.check_row(STRAGGLERS_GOOD, bound_max=102_269)
        for what, changes in [
                ("the slice double count of 2026-12-07", {"samples": 20_348_928, "trained": 6_782_976}),
                ("goodput twice its bound", {"goodput_samples_s": 294_379}),
                ("no worker finished", {"wall_s": 0}),
                ("a negative count", {"trained": -1})]:
            with self.subTest(bug=what), self.assertRaises(SystemExit):
                stragglers.check_row(broken(STRAGGLERS_GOOD, **changes), bound_max=102_269)

    def test_stragglers_counts_a_sliced_round_once(self):
        round_line = {"type": "round", "weights": [2048, 2048], "workers": ["worker/1.0", "worker/2.0"]}
        lines = [dict(round_line, slice=s, shards=3) for s in range(3)] + [
            {"type": "worker_done", "worker": w, "tokens_per_s": 4096 / 2.0, "wall_s": 2.0} for w in round_line["workers"]]
        row = stragglers.summarise("sliced", lines)
        self.assertEqual(row["rounds"], 1)
        self.assertEqual(row["samples"], 4096)
        self.assertLessEqual(row["samples"], row["trained"])

    def test_scale_refuses_a_dead_heads_row(self):
        scale.check_row(SCALE_GOOD, "out")
        for what, changes in [
                ("negative control bytes (the dead head of 2026-12-07)", {"control_bytes_per_node_s_in": -161,
                                                                          "control_bytes_per_node_s_out": -2657}),
                ("epochs gone backwards", {"epochs": -18}),
                ("no status timed", {"status_s": None}),
                ("nodes that never joined", {"joined": 400}),
                ("an actor that died", {"actor_deaths": 1}),
                ("a NaN", {"head_cpu": float("nan")})]:
            with self.subTest(bug=what), self.assertRaises(SystemExit):
                scale.check_row(broken(SCALE_GOOD, **changes), "out")


if __name__ == "__main__":
    unittest.main()
