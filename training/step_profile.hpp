#pragma once
// A Kineto trace (LibTorch's profiler: CPU ops, CUDA kernels, copies and runtime calls) of
// a window of a replica's training steps, to see where a GPU step's time goes next to
// PyTorch eager's (tools/bench/gpu_trace.py compares the two traces).
//
//   ATOLL_TORCH_PROFILE=FIRST:COUNT:FILE   trace steps FIRST .. FIRST+COUNT-1, then write a
//                                          Chrome trace (JSON) to FILE
//
// A diagnostic, off unless the variable is set. A LibTorch built without Kineto logs a
// warning and trains on. Include only from LibTorch code.
#include <cstdint>
#include <optional>
#include <string>

#include <torch/torch.h>

#include "runtime/core/error.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

struct step_profile_window {
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::string path;
};

// nullptr or "": no window. A malformed spec is invalid_config, with the expected form.
expected<std::optional<step_profile_window>> parse_step_profile(const char* spec);

class step_profiler {
 public:
  step_profiler(std::optional<step_profile_window> window, const torch::Device& device);
  // The window of ATOLL_TORCH_PROFILE; throws std::invalid_argument on a malformed one.
  static step_profiler from_environment(const torch::Device& device);
  ~step_profiler();
  step_profiler(const step_profiler&) = delete;  // one owner stops the profiler
  step_profiler& operator=(const step_profiler&) = delete;

  void before_step(std::int64_t step);
  void after_step(std::int64_t step);
  // Why the window produced no trace (the LibTorch cannot profile, the file cannot be
  // written); none while it runs or once it wrote one.
  const status& failure() const { return failure_; }

 private:
  void stop();  // waits for the device's queued work, then writes the trace

  std::optional<step_profile_window> window_;
  torch::Device device_;
  bool running_ = false;
  status failure_;
};

}  // namespace atl
