#pragma once
// The loss of a training step on an asynchronous device (CUDA), read one step late.
//
// Reading a step's loss right after queueing it (loss.item()) drains the device's queue:
// until the host has queued the next step, the device idles through everything the host
// does between steps (sampling the batch, the worker's messages, a round's decode). Here,
// after step N is queued the host waits for step N-1 only, so step N runs while the host
// works. Each loss is copied into pinned host memory behind its step, and a device event
// says when it has landed. Include only from LibTorch code.
#include <array>
#include <optional>

#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/torch.h>

namespace atl {

class lagged_loss {
 public:
  explicit lagged_loss(const torch::Device& device);

  // Queues the read of `loss` (a scalar of the step just queued) and returns the loss of
  // the step queued before it, once that step has finished; the first step's own loss.
  float push(const torch::Tensor& loss);
  // Waits for the newest step pushed and returns its loss; nullopt if none was pushed.
  std::optional<float> newest();

 private:
  struct slot {
    torch::Tensor host;  // a pinned fp32 scalar
    c10::Event landed;
  };
  float wait(slot& s);

  torch::Device device_;
  c10::impl::VirtualGuardImpl guard_;
  std::array<std::optional<slot>, 2> slots_;
  std::optional<std::size_t> newest_;  // the slot of the newest step pushed
};

}  // namespace atl
