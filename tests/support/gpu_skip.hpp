#pragma once
// Tests labelled gpu run only where this build's LibTorch has CUDA and a device answers;
// elsewhere they are skipped with the reason, never silently.
#include <gtest/gtest.h>

#include "runtime/device/codec_cuda.hpp"

#ifndef ATOLL_TORCH_CUDA
#define ATOLL_TORCH_CUDA 0
#endif

#define ATOLL_SKIP_WITHOUT_GPU()                                                                        \
  do {                                                                                                  \
    if (!ATOLL_TORCH_CUDA)                                                                              \
      GTEST_SKIP() << "this build's LibTorch has no CUDA (Debian's is CPU-only); on a GPU machine run " \
                      "./tools/dev gpu-test";                                                           \
    if (!::atl::cuda_codecs_available())                                                                \
      GTEST_SKIP() << "no CUDA device here, or this build has no CUDA kernels (nvcc was not found)";    \
  } while (0)
