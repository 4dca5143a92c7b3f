// replica over a LibTorch task: inner AdamW with linear warm-up, cosine decay to
// min_lr_ratio * lr at the last step, and global gradient-norm clipping.
//
// Fragments: the task's layer groups (for the GPT: embeddings, each block, the final norm)
// are assigned strided, group g to fragment g mod P (the default of DESIGN.md section 1),
// or sequential, contiguous runs of about G / P groups. A fragment's fp32 view is its
// parameters flattened in group order.
#include <cmath>
#include <cstring>

#include "examples/task.hpp"
#include "examples/tasks.hpp"

namespace atl {
namespace {

class torch_replica : public replica {
 public:
  torch_replica(const run_config& cfg, const replica_spec& spec, std::unique_ptr<task> t)
      : cfg_(cfg), device_(spec.device), task_(std::move(t)),
        optimizer_(task_->model().parameters(),
                   torch::optim::AdamWOptions(cfg.lr).weight_decay(cfg.weight_decay).betas({0.9, 0.95})) {
    task_->model().to(device_);  // before the optimizer sees the parameters' storage
    const auto groups = task_->layer_groups();
    const std::size_t p_count = static_cast<std::size_t>(cfg.fragments);
    if (groups.size() < p_count)
      throw std::invalid_argument("diloco.fragments = " + std::to_string(p_count) + " but the model has only " +
                                  std::to_string(groups.size()) + " layer groups");
    fragments_.resize(p_count);
    for (std::size_t g = 0; g < groups.size(); ++g) {
      const std::size_t f = cfg.assignment == "sequential" ? g * p_count / groups.size() : g % p_count;
      for (const auto& p : groups[g]) fragments_[f].push_back(p);
    }
  }

  std::size_t fragment_count() const override { return fragments_.size(); }

  std::size_t fragment_size(std::size_t f) const override {
    std::size_t n = 0;
    for (const auto& p : fragments_.at(f)) n += static_cast<std::size_t>(p.numel());
    return n;
  }

  void read_fragment(std::size_t f, float* values) const override {
    for (const auto& p : fragments_.at(f)) {
      auto c = p.detach().to(torch::kCPU).contiguous();
      std::memcpy(values, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
      values += c.numel();
    }
  }

  void write_fragment(std::size_t f, const float* values) override {
    torch::NoGradGuard no_grad;
    for (auto& p : fragments_.at(f)) {
      p.copy_(torch::from_blob(const_cast<float*>(values), p.sizes(), torch::kFloat32).to(device_));
      values += p.numel();
    }
  }

  step_result train_step(std::int64_t step) override {
    const auto result = compute_gradients(step);
    apply_gradients(step);
    return result;
  }

  step_result compute_gradients(std::int64_t) override {
    task_->model().train();
    optimizer_.zero_grad();
    auto loss = task_->loss(on_device(task_->next_train_batch()));
    loss.backward();
    return {loss.item<float>(), task_->tokens_per_batch()};
  }

  void read_gradients(std::size_t f, float* values) const override {
    for (const auto& p : fragments_.at(f)) {
      auto g = p.grad().defined() ? p.grad().detach().to(torch::kCPU).contiguous() : torch::zeros_like(p, torch::kCPU);
      std::memcpy(values, g.data_ptr<float>(), static_cast<std::size_t>(g.numel()) * sizeof(float));
      values += g.numel();
    }
  }

  void write_gradients(std::size_t f, const float* values) override {
    torch::NoGradGuard no_grad;
    for (auto& p : fragments_.at(f)) {
      auto incoming = torch::from_blob(const_cast<float*>(values), p.sizes(), torch::kFloat32).to(device_);
      if (p.grad().defined()) p.mutable_grad().copy_(incoming);
      else p.mutable_grad() = incoming.clone();
      values += p.numel();
    }
  }

  void apply_gradients(std::int64_t step) override {
    const double lr = learning_rate(step);
    for (auto& group : optimizer_.param_groups())
      static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    if (cfg_.grad_clip > 0) torch::nn::utils::clip_grad_norm_(task_->model().parameters(), cfg_.grad_clip);
    optimizer_.step();
  }

  float evaluate() override {
    torch::NoGradGuard no_grad;
    task_->model().eval();
    double total = 0;
    const auto& batches = task_->eval_batches();
    for (const auto& b : batches) total += task_->loss(on_device(b)).item<double>();
    return static_cast<float>(total / static_cast<double>(batches.size()));
  }

 private:
  double learning_rate(std::int64_t step) const {
    if (step < cfg_.warmup_steps) return cfg_.lr * static_cast<double>(step + 1) / static_cast<double>(cfg_.warmup_steps);
    const double span = std::max<std::int64_t>(1, cfg_.steps - cfg_.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(step - cfg_.warmup_steps) / span);
    const double floor = cfg_.min_lr_ratio;
    return cfg_.lr * (floor + (1.0 - floor) * 0.5 * (1.0 + std::cos(M_PI * progress)));
  }

  batch on_device(const batch& b) const {
    if (device_.is_cpu()) return b;
    return {b.inputs.to(device_), b.targets.to(device_)};
  }

  run_config cfg_;
  torch::Device device_;
  std::unique_ptr<task> task_;
  torch::optim::AdamW optimizer_;
  std::vector<std::vector<torch::Tensor>> fragments_;
};

}  // namespace

replica_factory torch_replica_factory() {
  return [](const run_config& cfg, const replica_spec& spec) -> std::unique_ptr<replica> {
    return std::make_unique<torch_replica>(cfg, spec, make_task(cfg, spec));
  };
}

}  // namespace atl

namespace atl {

void set_compute_threads(int threads) {
  torch::set_num_threads(threads);
}

std::size_t cuda_device_count() { return torch::cuda::device_count(); }

bool cuda_device_available(const std::string& device) {
  if (device.rfind("cuda:", 0) != 0 || device.size() == 5) return false;
  for (std::size_t i = 5; i < device.size(); ++i)
    if (device[i] < '0' || device[i] > '9') return false;
  return std::stoul(device.substr(5)) < cuda_device_count();
}

}  // namespace atl
