#include "training/inner_optimizer.hpp"

#include <algorithm>
#include <cstring>
#include <sstream>
#include <string>
#include <type_traits>

#include <torch/version.h>

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)
#define ATOLL_HAS_FUSED_ADAMW 1
#endif

namespace atl {

constexpr double beta1 = 0.9, beta2 = 0.95, adam_eps = 1e-8;

// The optimizer state of the fused kernel: one moment pair and one fp32 step count per
// parameter, all on the parameters' device.
struct inner_optimizer::fused_adamw {
  std::vector<torch::Tensor> exp_avg, exp_avg_sq, steps;
  double weight_decay = 0;
};

inner_optimizer::inner_optimizer(std::vector<torch::Tensor> params, const run_config& cfg, const torch::Device& device)
    : params_(std::move(params)), grad_clip_(cfg.grad_clip) {
#ifdef ATOLL_HAS_FUSED_ADAMW
  if (device.is_cuda()) {
    fused_ = std::make_unique<fused_adamw>();
    fused_->weight_decay = cfg.weight_decay;
    for (const auto& p : params_) {
      fused_->exp_avg.push_back(torch::zeros_like(p));
      fused_->exp_avg_sq.push_back(torch::zeros_like(p));
      fused_->steps.push_back(torch::zeros({}, p.options().dtype(torch::kFloat32)));
    }
    return;
  }
#endif
  (void)device;
  loop_ = std::make_unique<torch::optim::AdamW>(
      params_, torch::optim::AdamWOptions(cfg.lr).weight_decay(cfg.weight_decay).betas({beta1, beta2}).eps(adam_eps));
}

inner_optimizer::~inner_optimizer() = default;

bool inner_optimizer::fused() const { return fused_ != nullptr; }

namespace {

// torch::optim keys a parameter's state by its TensorImpl: a printed pointer before
// LibTorch 2, the pointer itself after.
using adamw_state_map = std::decay_t<decltype(std::declval<torch::optim::AdamW&>().state())>;

template <class Key>
Key state_key(const torch::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream printed;  // what c10::guts::to_string writes
    printed << p.unsafeGetTensorImpl();
    return printed.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}

void copy_out(const torch::Tensor& t, float*& values) {
  const auto host = t.detach().to(torch::kCPU, torch::kFloat32).contiguous();
  std::memcpy(values, host.data_ptr<float>(), static_cast<std::size_t>(host.numel()) * sizeof(float));
  values += host.numel();
}

torch::Tensor copy_in(const float*& values, const torch::Tensor& like) {
  auto t = torch::from_blob(const_cast<float*>(values), like.sizes(), torch::kFloat32).to(like.options(), false, true);
  values += like.numel();
  return t;
}

}  // namespace

std::size_t inner_optimizer::state_size() const {
  std::size_t n = 0;
  for (const auto& p : params_) n += 2 * static_cast<std::size_t>(p.numel());
  return n;
}

std::int64_t inner_optimizer::read_state(float* values) const {
  torch::NoGradGuard no_grad;
  std::int64_t step = 0;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    if (fused_) {
      copy_out(fused_->exp_avg[i], values);
      copy_out(fused_->exp_avg_sq[i], values);
      step = std::max(step, static_cast<std::int64_t>(fused_->steps[i].item<float>()));
      continue;
    }
    const auto& states = loop_->state();
    const auto found = states.find(state_key<adamw_state_map::key_type>(p));
    if (found == states.end()) {  // not stepped yet
      std::memset(values, 0, 2 * static_cast<std::size_t>(p.numel()) * sizeof(float));
      values += 2 * p.numel();
      continue;
    }
    const auto& adam = static_cast<const torch::optim::AdamWParamState&>(*found->second);
    copy_out(adam.exp_avg(), values);
    copy_out(adam.exp_avg_sq(), values);
    step = std::max(step, static_cast<std::int64_t>(adam.step()));
  }
  return step;
}

void inner_optimizer::write_state(const float* values, std::int64_t step) {
  torch::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const auto& p = params_[i];
    auto exp_avg = copy_in(values, p);
    auto exp_avg_sq = copy_in(values, p);
    if (fused_) {
      fused_->exp_avg[i].copy_(exp_avg);
      fused_->exp_avg_sq[i].copy_(exp_avg_sq);
      fused_->steps[i].fill_(static_cast<double>(step));
      continue;
    }
    auto adam = std::make_unique<torch::optim::AdamWParamState>();
    adam->exp_avg(exp_avg);
    adam->exp_avg_sq(exp_avg_sq);
    adam->step(step);
    loop_->state()[state_key<adamw_state_map::key_type>(p)] = std::move(adam);
  }
}

void inner_optimizer::zero_grad() {
  if (loop_) {
    loop_->zero_grad();
    return;
  }
  for (auto& p : params_) p.mutable_grad() = torch::Tensor();  // set to none, as PyTorch does
}

void inner_optimizer::step(double lr) {
  if (loop_) {
    for (auto& group : loop_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    if (grad_clip_ > 0) torch::nn::utils::clip_grad_norm_(params_, grad_clip_);
    loop_->step();
    return;
  }
#ifdef ATOLL_HAS_FUSED_ADAMW
  std::vector<torch::Tensor> params, grads, exp_avg, exp_avg_sq, steps;
  for (std::size_t i = 0; i < params_.size(); ++i) {
    if (!params_[i].grad().defined()) continue;
    params.push_back(params_[i]);
    grads.push_back(params_[i].grad());
    exp_avg.push_back(fused_->exp_avg[i]);
    exp_avg_sq.push_back(fused_->exp_avg_sq[i]);
    steps.push_back(fused_->steps[i]);
  }
  if (params.empty()) return;
  torch::NoGradGuard no_grad;
  if (grad_clip_ > 0) {  // clip_grad_norm_'s arithmetic, without reading the norm back
    const auto total = torch::stack(at::_foreach_norm(grads, 2)).norm(2);
    at::_foreach_mul_(grads, torch::clamp_max(grad_clip_ / (total + 1e-6), 1.0));
  }
  at::_foreach_add_(steps, 1);
  at::_fused_adamw_(params, grads, exp_avg, exp_avg_sq, {}, steps, lr, beta1, beta2, fused_->weight_decay, adam_eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#endif  // without the fused kernel, loop_ is always set and took the step above
}

}  // namespace atl
