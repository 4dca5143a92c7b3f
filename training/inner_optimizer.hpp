#pragma once
// The inner optimizer of a replica: global gradient-norm clipping, then AdamW
// (betas 0.9, 0.95). Include only from LibTorch code.
//
// Two implementations of the same update:
//   - LibTorch's torch::optim::AdamW and clip_grad_norm_ (CPU, and any LibTorch before 2.1);
//   - on CUDA with LibTorch 2.1 or newer, the fused multi-tensor kernel (at::_fused_adamw_,
//     what PyTorch's AdamW(fused=True) calls) and a clipping that stays on the device.
//     The per-parameter loop launches about seven kernels per parameter and its clipping
//     reads the norm back to the host; on a GPU those launches and that wait, not the
//     arithmetic, were the optimizer's cost.
#include <memory>
#include <vector>

#include <torch/torch.h>

#include "runtime/process/config.hpp"

namespace atl {

class inner_optimizer {
 public:
  inner_optimizer(std::vector<torch::Tensor> params, const run_config& cfg, const torch::Device& device);
  ~inner_optimizer();
  void zero_grad();
  // Clips the gradients (run.grad_clip > 0) and takes one AdamW step at learning rate lr.
  void step(double lr);
  // True when the fused kernel is in use (it depends on the device and the LibTorch).
  bool fused() const;
  // AdamW's state as fp32 values, for a joiner that starts warm: per parameter in order, its
  // first moment, then its second (zeros for a parameter not stepped yet). 2 x the values of
  // the parameters, the same layout in both implementations.
  std::size_t state_size() const;
  std::int64_t read_state(float* values) const;  // returns the step count
  void write_state(const float* values, std::int64_t step);

 private:
  struct fused_adamw;
  std::vector<torch::Tensor> params_;
  double grad_clip_;
  std::unique_ptr<torch::optim::AdamW> loop_;  // the per-parameter implementation
  std::unique_ptr<fused_adamw> fused_;
};

}  // namespace atl
