#pragma once
// The registered tasks, seen without LibTorch: names for validation and a replica
// factory for node agents.
#include <string>
#include <vector>

#include "actors/replica.hpp"

namespace atl {

std::vector<std::string> task_names();
bool has_task(const std::string& name);
// Builds a LibTorch replica of the configured task (examples/torch_replica.cpp).
replica_factory torch_replica_factory();

}  // namespace atl

namespace atl {

// The compute threads of this process: LibTorch's intra-op threads and the BLAS
// library's pool (two workers on two cores want one each). Returns what was applied;
// blas_library is empty where no known BLAS pool was found.
struct compute_threads {
  int torch = 0;
  int blas = 0;
  std::string blas_library;
};
compute_threads set_compute_threads(int threads);
compute_threads set_compute_threads(int torch_threads, int blas_threads);
std::string describe(const compute_threads& threads);
// CUDA devices the linked LibTorch sees (0 with a CPU-only LibTorch such as Debian's).
std::size_t cuda_device_count();

}  // namespace atl
