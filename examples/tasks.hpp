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

// LibTorch's intra-op threads for this process (two workers on two cores want one each).
void set_compute_threads(int threads);
// CUDA devices the linked LibTorch sees (0 with a CPU-only LibTorch such as Debian's).
std::size_t cuda_device_count();

}  // namespace atl
