#include "training/lagged_loss.hpp"

#include <chrono>
#include <thread>

namespace atl {

lagged_loss::lagged_loss(const torch::Device& device) : device_(device), guard_(device.type()) {
  for (auto& s : slots_)
    s = slot{torch::empty({}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true)),
             c10::Event(device.type())};
}

float lagged_loss::push(const torch::Tensor& loss) {
  const std::size_t next = newest_ ? 1 - *newest_ : 0;
  auto& s = *slots_[next];
  s.host.copy_(loss.detach().to(torch::kFloat32), /*non_blocking=*/true);
  s.landed.record(guard_.getStream(device_));
  const std::size_t before = newest_.value_or(next);
  newest_ = next;
  return wait(*slots_[before]);
}

std::optional<float> lagged_loss::newest() {
  if (!newest_) return std::nullopt;
  return wait(*slots_[*newest_]);
}

float lagged_loss::wait(slot& s) {
  // Polled: c10::Event has no blocking wait in LibTorch 1.13. A step takes tens of
  // milliseconds; a 50 us poll costs well under 1% of it and no busy core.
  while (!s.landed.query()) std::this_thread::sleep_for(std::chrono::microseconds(50));
  return s.host.item<float>();
}

}  // namespace atl
