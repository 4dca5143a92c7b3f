// The registry's data cursor under a large run (Google Benchmark): applying one RoundReport's
// ties (one contribution each of M workers) to a cursor that already holds H chunks of the
// run's history, and encoding the cursor's record, which the registry writes after every
// report: whole before, in parts now (the bytes a save writes are counted).
//   build/tools/atoll_cursor_bench [--benchmark_filter=ties]
// Baseline in the same run: what the registry did before tie_all, a snapshot of the whole
// cursor before each contribution's ties (to undo them if one was refused).
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "actors/decisions/data_cursor.hpp"
#include "actors/shared/cursor_record.hpp"

namespace {

using atl::data::data_cursor;

// A cursor whose `history` chunks were each leased by one of `workers`, tied and committed
// in rounds of one chunk a worker (one fragment): consumed, with their ledgers kept.
data_cursor cursor_with_history(std::size_t history, std::size_t workers, std::uint64_t& round) {
  auto c = *data_cursor::make({std::uint64_t{1} << 40, 64, 1, 0});
  std::vector<std::string> names;
  for (std::size_t w = 0; w < workers; ++w) names.push_back("worker/" + std::to_string(w) + ".0");
  for (round = 1; (round - 1) * workers < history; ++round) {
    for (const auto& w : names) {
      const auto chunk = *c.lease(w);
      (void)c.tie(w, 0, round, chunk, c.positions_of(chunk));
    }
    c.committed(0, round, 0, names, {});
  }
  return c;
}

// One report: every worker leased a chunk (untimed), then its contribution's ties are
// applied (timed), then the round commits (untimed). `snapshot_per_tie`: the baseline.
void apply_report(benchmark::State& state, bool snapshot_per_tie) {
  const auto history = static_cast<std::size_t>(state.range(0));
  const auto workers = static_cast<std::size_t>(state.range(1));
  std::uint64_t round = 0;
  auto c = cursor_with_history(history, workers, round);
  std::vector<std::string> names;
  for (std::size_t w = 0; w < workers; ++w) names.push_back("worker/" + std::to_string(w) + ".0");
  std::vector<std::vector<atl::data::piece>> pieces(workers);
  for (auto _ : state) {
    state.PauseTiming();
    for (std::size_t w = 0; w < workers; ++w) {
      const auto chunk = *c.lease(names[w]);
      pieces[w] = {{chunk, c.positions_of(chunk)}};
    }
    state.ResumeTiming();
    for (std::size_t w = 0; w < workers; ++w) {
      if (snapshot_per_tie) {
        const auto before = c.snapshot();
        benchmark::DoNotOptimize(before.chunks.data());
      }
      if (c.tie_all(names[w], 0, round, pieces[w])) state.SkipWithError("a tie was refused");
    }
    state.PauseTiming();
    c.committed(0, round++, 0, names, {});
    state.ResumeTiming();
  }
  state.counters["chunks"] = static_cast<double>(c.snapshot().chunks.size());
}

// The record the registry persists after every report, written whole (the baseline: what
// it did before parts) or in parts, made again from the chunks the report changed (the
// header and their buckets; what changed since the last save is written). Each iteration is
// one report of 64 contributions (untimed), then the encoding.
void save_after_report(benchmark::State& state, bool in_parts) {
  const std::size_t workers = 64;
  std::uint64_t round = 0;
  auto c = cursor_with_history(static_cast<std::size_t>(state.range(0)), workers, round);
  std::vector<std::string> names;
  for (std::size_t w = 0; w < workers; ++w) names.push_back("worker/" + std::to_string(w) + ".0");
  auto stored = atl::encode_cursor_parts(c.snapshot());
  auto parts = stored;
  (void)c.take_changed();
  std::size_t record = 0, written = 0;
  for (auto _ : state) {
    state.PauseTiming();
    for (const auto& w : names) {
      const auto chunk = *c.lease(w);
      (void)c.tie(w, 0, round, chunk, c.positions_of(chunk));
    }
    c.committed(0, round++, 0, names, {});
    state.ResumeTiming();
    if (!in_parts) {
      const auto whole = atl::encode_cursor(c.snapshot());
      record = written = whole.size();
      benchmark::DoNotOptimize(whole.data());
      continue;
    }
    atl::update_cursor_parts(c, c.take_changed(), parts);  // what the registry does
    state.PauseTiming();
    record = parts.header.size();
    written = parts.header.size();
    for (const auto& [key, bytes] : parts.buckets) {
      record += bytes.size();
      const auto before = stored.buckets.find(key);
      if (before == stored.buckets.end() || before->second != bytes) written += bytes.size();
    }
    stored = parts;
    state.ResumeTiming();
  }
  state.counters["record_bytes"] = static_cast<double>(record);
  state.counters["written_bytes"] = static_cast<double>(written);
}

// History of 1 Ki and 16 Ki chunks (64 units each), reports of 16 and 256 contributions.
void report_args(benchmark::internal::Benchmark* b) {
  for (const int history : {1024, 16384})
    for (const int workers : {16, 256}) b->Args({history, workers});
  b->Unit(benchmark::kMillisecond)->Iterations(20);
}

}  // namespace

BENCHMARK_CAPTURE(apply_report, ties_with_a_snapshot_each_baseline, true)->Apply(report_args);
BENCHMARK_CAPTURE(apply_report, ties_all_or_none, false)->Apply(report_args);
BENCHMARK_CAPTURE(save_after_report, whole_baseline, false)
    ->Arg(1024)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);
BENCHMARK_CAPTURE(save_after_report, in_parts, true)
    ->Arg(1024)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(20);
BENCHMARK_MAIN();
