#include "training/device_fragments.hpp"

#include <cstring>

namespace atl {

device_fragments::device_fragments(std::vector<std::vector<torch::Tensor>> fragments, const torch::Device& device)
    : fragments_(std::move(fragments)),
      device_(device),
      global_(fragments_.size()),
      residual_(fragments_.size()),
      codec_(device.has_index() ? device.index() : 0) {}

torch::Tensor device_fragments::flatten(std::size_t f) const {
  std::vector<torch::Tensor> flat;
  for (const auto& p : fragments_.at(f)) flat.push_back(p.detach().reshape({-1}));
  return torch::cat(flat);
}

void device_fragments::scatter(std::size_t f, const torch::Tensor& flat) {
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (auto& p : fragments_.at(f)) {
    p.copy_(flat.slice(0, offset, offset + p.numel()).view_as(p));
    offset += p.numel();
  }
}

void device_fragments::upload_global(std::size_t f, const float* theta_global) {
  std::int64_t count = 0;
  for (const auto& p : fragments_.at(f)) count += p.numel();
  if (!global_[f].defined())
    global_[f] = torch::empty({count}, torch::TensorOptions().dtype(torch::kFloat32).device(device_));
  // Through pinned memory: from there the copy is queued behind the step in flight
  // (lagged_loss.hpp), where a pageable source would make the host wait for that step.
  // LibTorch's pinned allocator keeps the buffer until the copy has read it.
  auto staging = torch::empty({count}, torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(true));
  std::memcpy(staging.data_ptr<float>(), theta_global, static_cast<std::size_t>(count) * sizeof(float));
  global_[f].copy_(staging, /*non_blocking=*/true);
}

void device_fragments::adopt(std::size_t f, const float* theta_global) {
  upload_global(f, theta_global);
  scatter(f, global_[f]);
}

std::vector<std::size_t> device_fragments::adopt_every_global() {
  std::vector<std::size_t> adopted;
  for (std::size_t f = 0; f < fragments_.size(); ++f) {
    if (!global_[f].defined()) continue;
    scatter(f, global_[f]);
    adopted.push_back(f);
  }
  return adopted;
}

void device_fragments::merge(std::size_t f, const float* theta_global, float alpha) {
  upload_global(f, theta_global);
  if (alpha == 0.0f) {
    scatter(f, global_[f]);
    return;
  }
  torch::NoGradGuard no_grad;
  std::int64_t offset = 0;
  for (auto& p : fragments_.at(f)) {
    p.mul_(alpha).add_(global_[f].slice(0, offset, offset + p.numel()).view_as(p), 1.0f - alpha);
    offset += p.numel();
  }
}

status device_fragments::encode(std::size_t f, const replica::encoding& how, encoded_values& out) {
  if (!global_.at(f).defined())
    return make_error(errc::not_ready, "fragment " + std::to_string(f) + " has no theta_global yet");
  const auto local = flatten(f);
  float* residual = nullptr;
  if (how.error_feedback) {
    if (!residual_[f].defined()) residual_[f] = torch::zeros_like(local);
    // SparseLoCo's decayed accumulator: target = delta + decay * residual. Unlike the host
    // path the residual is scaled before an encode that may refuse it; a refusal (the
    // replica diverged) ends the worker anyway.
    if (how.feedback_decay != 1.0f) residual_[f].mul_(how.feedback_decay);
    residual = residual_[f].data_ptr<float>();
  }
  return codec_.encode_delta(how.codec, global_[f].data_ptr<float>(), local.data_ptr<float>(), residual,
                             static_cast<std::size_t>(local.numel()), how.chunk, nullptr, out);
}

}  // namespace atl
