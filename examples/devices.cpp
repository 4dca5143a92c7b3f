// What LibTorch reports about this process's compute: threads and CUDA devices.
#include "examples/tasks.hpp"

#include <torch/torch.h>

namespace atl {

void set_compute_threads(int threads) { torch::set_num_threads(threads); }

std::size_t cuda_device_count() { return torch::cuda::device_count(); }

}  // namespace atl
