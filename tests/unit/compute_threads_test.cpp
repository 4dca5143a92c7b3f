// The compute thread budget of a process (training/devices.cpp): LibTorch's intra-op
// threads and the BLAS pool both follow it, on the thread that set it and on threads
// started later (a detached worker actor trains on its own thread).
#include <link.h>

#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "training/tasks.hpp"

namespace atl {
namespace {

bool openblas_is_loaded() {
  bool found = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        char resolved[4096];
        const char* name = info->dlpi_name ? info->dlpi_name : "";
        const std::string real = *name && ::realpath(name, resolved) ? resolved : name;
        if (real.find("openblas") != std::string::npos) *static_cast<bool*>(out) = true;
        return 0;
      },
      &found);
  return found;
}

int torch_threads_on_a_new_thread() {
  int seen = 0;
  std::thread t([&] { seen = torch::get_num_threads(); });
  t.join();
  return seen;
}

TEST(ComputeThreads, TheBudgetBindsLibTorchAndTheBlasPoolOnEveryThread) {
  for (int threads : {2, 1}) {
    SCOPED_TRACE("threads " + std::to_string(threads));
    const auto applied = set_compute_threads(threads);
    EXPECT_EQ(applied.torch, threads);
    EXPECT_EQ(torch::get_num_threads(), threads);
    EXPECT_EQ(torch_threads_on_a_new_thread(), threads);
    if (openblas_is_loaded()) {
      EXPECT_EQ(applied.blas_library, "OpenBLAS");
      EXPECT_EQ(applied.blas, threads);
    } else {
      EXPECT_TRUE(applied.blas_library.empty() || applied.blas == threads) << applied.blas_library;
    }
  }
}

TEST(ComputeThreads, DescribeNamesWhatWasApplied) {
  EXPECT_EQ(describe({1, 1, "OpenBLAS"}), "LibTorch uses 1 thread(s) per process, OpenBLAS 1");
  EXPECT_EQ(describe({2, 0, ""}), "LibTorch uses 2 thread(s) per process");
}

}  // namespace
}  // namespace atl
