#pragma once
// The outer-sync side of a replica that trains on a CUDA device (see replica::adopt_global
// and its siblings): theta_global and the error-feedback residual of each fragment stay
// in device memory, the pseudo-gradient is computed and encoded there
// (runtime/device/codec_cuda.hpp), and only the codes cross PCIe, through the codec's
// pinned buffers. The fp32 result of a round comes from the wire, so it crosses once,
// host to device, queued behind the step in flight. Include only from LibTorch code.
#include <vector>

#include <torch/torch.h>

#include "actors/worker/replica.hpp"
#include "runtime/device/codec_cuda.hpp"

namespace atl {

class device_fragments {
 public:
  // `fragments`: each fragment's parameters in order, all on `device` (a CUDA device).
  device_fragments(std::vector<std::vector<torch::Tensor>> fragments, const torch::Device& device);

  void adopt(std::size_t f, const float* theta_global);
  // theta_global into the parameters of every fragment that has one (a run's end); returns
  // those fragments.
  std::vector<std::size_t> adopt_every_global();
  void merge(std::size_t f, const float* theta_global, float alpha);
  status encode(std::size_t f, const replica::encoding& how, encoded_values& out);
  // Swaps theta_global into every adopted fragment, calls evaluate, swaps the local back.
  template <class Evaluate>
  float with_global(Evaluate evaluate) {
    std::vector<torch::Tensor> local(fragments_.size());
    for (std::size_t f = 0; f < fragments_.size(); ++f) {
      if (!global_[f].defined()) continue;
      local[f] = flatten(f);
      scatter(f, global_[f]);
    }
    const float loss = evaluate();
    for (std::size_t f = 0; f < fragments_.size(); ++f)
      if (local[f].defined()) scatter(f, local[f]);
    return loss;
  }

 private:
  torch::Tensor flatten(std::size_t f) const;  // a contiguous copy of the local fragment
  void scatter(std::size_t f, const torch::Tensor& flat);  // flat values into the parameters
  void upload_global(std::size_t f, const float* theta_global);  // host fp32 -> global_[f]

  std::vector<std::vector<torch::Tensor>> fragments_;
  torch::Device device_;
  std::vector<torch::Tensor> global_, residual_;  // per fragment, on device_
  device_codec codec_;
};

}  // namespace atl
