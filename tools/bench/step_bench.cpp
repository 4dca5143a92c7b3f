// The bare inner loop: the configured task's replica (same model, initialisation, batch
// sampling, AdamW, clipping and schedule as an Atoll worker) stepped in a plain loop on
// the main thread, with no actors and no network. The baseline for the runtime's own
// overhead in `./tools/dev bench step` (tools/bench/step.py), which reads the lines
// "step N" this prints after every step and samples this process's /proc while it runs.
//
// With --cursor, each step first takes its units from a data_feed fed by leases made here as
// the head would make them (actors/worker/data_feed.hpp), as a worker on the run's data
// cursor does on its step's thread, and every sync interval the feed's pieces of a
// contribution; each "step N" line then ends "feed_us U": that work's time in the step.
//
//   atoll_step_bench --threads T --steps N [--cursor] [--set key=value ...]
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/worker/data_feed.hpp"
#include "runtime/device/compute_env.hpp"
#include "runtime/process/config.hpp"
#include "training/tasks.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Atoll's inner step in a bare loop (see tools/bench/step.py)"};
  int threads = 1;
  std::int64_t steps = 200;
  std::vector<std::string> sets;
  int torch_threads = 0, blas_threads = 0;
  bool cursor = false;
  app.add_option("--threads", threads, "LibTorch intra-op threads")->check(CLI::Range(1, 1024));
  app.add_option("--steps", steps, "steps to run (run.steps: the schedule's length)")->check(CLI::Range(1, 10000000));
  app.add_option("--set", sets, "a config override, as for atoll local");
  app.add_option("--torch-threads", torch_threads, "explore: LibTorch's intra-op threads apart from --threads");
  app.add_option("--blas-threads", blas_threads, "explore: the BLAS pool apart from --threads");
  app.add_flag("--cursor", cursor, "take each step's units from a data feed, as a worker on the data cursor does");
  CLI11_PARSE(app, argc, argv);
  atl::reexec_with_compute_env(argv);  // as `atoll join` does
  atl::tune_allocator_for_training();

  atl::run_config cfg;
  for (const auto& s : sets) {
    if (auto err = atl::apply_override(cfg, s)) {
      std::cerr << "atoll_step_bench: " << err.describe() << "\n";
      return 2;
    }
  }
  cfg.steps = steps;
  if (auto err = atl::validate(cfg)) {
    std::cerr << "atoll_step_bench: " << err.describe() << "\n";
    return 2;
  }
  auto applied = atl::set_compute_threads(threads);
  if (torch_threads > 0 || blas_threads > 0)
    applied = atl::set_compute_threads(torch_threads > 0 ? torch_threads : threads,
                                       blas_threads > 0 ? blas_threads : threads);
  std::cerr << atl::describe(applied) << "\n";
  auto replica = atl::torch_replica_factory()(cfg, atl::replica_spec{});
  std::optional<atl::data_feed> feed;
  const auto per_step = replica->units_per_step(), units = replica->data_units();
  const auto chunk = static_cast<std::uint64_t>(cfg.sync_every) * per_step;
  std::uint64_t epoch = 0, next_chunk = 0;
  if (cursor) {
    if (units == 0 || per_step == 0) {
      std::cerr << "atoll_step_bench: --cursor: this task samples its own data\n";
      return 2;
    }
    feed.emplace(units, chunk, per_step, 1);
  }
  std::cout << "ready" << std::endl;
  for (std::int64_t step = 0; step < steps; ++step) {
    std::string fed;
    if (feed) {  // what the worker's step does with the cursor, leases made as the head makes them
      const auto start = std::chrono::steady_clock::now();
      while (feed->wants_lease()) {
        if (next_chunk * chunk >= units) ++epoch, next_chunk = 0;
        const std::uint64_t begin = next_chunk * chunk;
        feed->leased({epoch, next_chunk++}, {begin, std::min(begin + chunk, units)},
                     static_cast<std::uint64_t>(cfg.seed));
      }
      replica->queue_units(*feed->take_step(step));
      if ((step + 1) % cfg.sync_every == 0) (void)feed->contribution(0, step + 1);
      fed = " feed_us " +
            std::to_string(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    }
    const auto result = replica->train_step(step);
    std::cout << "step " << step + 1 << " loss " << result.loss << fed << "\n" << std::flush;
  }
  return 0;
}
