// The bare inner loop: the configured task's replica (same model, initialisation, batch
// sampling, AdamW, clipping and schedule as an Atoll worker) stepped in a plain loop on
// the main thread, with no actors and no network. The baseline for the runtime's own
// overhead in `./tools/dev bench step` (tools/bench/step.py), which reads the lines
// "step N" this prints after every step and samples this process's /proc while it runs.
//
//   atoll_step_bench --threads T --steps N [--set key=value ...]
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "examples/tasks.hpp"
#include "runtime/device/compute_env.hpp"
#include "runtime/process/config.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Atoll's inner step in a bare loop (see tools/bench/step.py)"};
  int threads = 1;
  std::int64_t steps = 200;
  std::vector<std::string> sets;
  int torch_threads = 0, blas_threads = 0;
  app.add_option("--threads", threads, "LibTorch intra-op threads")->check(CLI::Range(1, 1024));
  app.add_option("--steps", steps, "steps to run (run.steps: the schedule's length)")->check(CLI::Range(1, 10000000));
  app.add_option("--set", sets, "a config override, as for atoll local");
  app.add_option("--torch-threads", torch_threads, "explore: LibTorch's intra-op threads apart from --threads");
  app.add_option("--blas-threads", blas_threads, "explore: the BLAS pool apart from --threads");
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
  std::cout << "ready" << std::endl;
  for (std::int64_t step = 0; step < steps; ++step) {
    const auto result = replica->train_step(step);
    std::cout << "step " << step + 1 << " loss " << result.loss << "\n" << std::flush;
  }
  return 0;
}
