// replica over a LibTorch task: inner AdamW with linear warm-up, cosine decay to
// min_lr_ratio * lr at the last step, and global gradient-norm clipping
// (training/inner_optimizer.hpp).
//
// Fragments: the task's layer groups (for the GPT: embeddings, each block, the final norm)
// are assigned strided, group g to fragment g mod P (the default of docs/design.md section 1),
// or sequential, contiguous runs of about G / P groups. A fragment's fp32 view is its
// parameters flattened in group order.
//
// On a CUDA device the model, the optimizer state, theta_global and the error-feedback
// residual live on the device (training/device_fragments.hpp); batches are sampled on the
// host and copied asynchronously from pinned memory; with model.precision = bf16 the
// forward pass runs under autocast. The host waits once per step, for the loss of the
// step before (training/lagged_loss.hpp): one step is always queued on the device.
#include <cmath>
#include <cstring>

#include <ATen/autocast_mode.h>
#include <torch/version.h>

#include "runtime/process/log.hpp"
#include "training/device_fragments.hpp"
#include "training/fragment_tensors.hpp"
#include "training/inner_optimizer.hpp"
#include "training/lagged_loss.hpp"
#include "training/step_profile.hpp"
#include "training/task.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

// bf16 autocast on CUDA for the scope's lifetime (thread-local in LibTorch, so it covers
// only the worker's own thread). Does nothing when off.
class autocast_scope {
 public:
  explicit autocast_scope(bool on) : on_(on) {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, true);
    at::autocast::set_autocast_dtype(at::kCUDA, at::kBFloat16);
#else
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
#endif
    at::autocast::increment_nesting();
  }
  ~autocast_scope() {
    if (!on_) return;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
    at::autocast::set_autocast_enabled(at::kCUDA, false);
#else
    at::autocast::set_enabled(false);
#endif
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();  // the bf16 weight copies
  }
  autocast_scope(const autocast_scope&) = delete;
  autocast_scope& operator=(const autocast_scope&) = delete;

 private:
  bool on_;
};

class torch_replica : public replica {
 public:
  torch_replica(const run_config& cfg, const replica_spec& spec, std::unique_ptr<task> t)
      : cfg_(cfg), device_(spec.device), task_(std::move(t)), profiler_(step_profiler::from_environment(device_)) {
    task_->to(device_);
    optimizer_ = std::make_unique<inner_optimizer>(task_->parameters(), cfg, device_);
    fragments_ = assign_fragments(task_->layer_groups(), cfg);
    if (device_.is_cuda()) {
      on_device_ = std::make_unique<device_fragments>(fragments_, device_);
      lagged_loss_.emplace(device_);
      bf16_ = cfg.precision == "bf16";
      log_info("replica on " + device_.str() + ": " + (bf16_ ? "bf16 autocast" : "fp32") + ", " +
               (optimizer_->fused() ? "fused AdamW" : "per-parameter AdamW"));
    }
  }

  std::size_t fragment_count() const override { return fragments_.size(); }

  std::size_t fragment_size(std::size_t f) const override { return value_count(fragments_.at(f)); }
  void read_fragment(std::size_t f, float* values) const override { read_values(fragments_.at(f), values); }
  void write_fragment(std::size_t f, const float* values) override { write_values(fragments_.at(f), values); }

  step_result train_step(std::int64_t step) override {
    profiler_.before_step(step);
    const auto loss = forward_backward();
    apply_gradients(step);
    profiler_.after_step(step);
    if (lagged_loss_) return {lagged_loss_->push(loss), task_->tokens_per_batch()};
    return {loss.item<float>(), task_->tokens_per_batch()};
  }

  std::optional<float> finish_queued_step() override { return lagged_loss_ ? lagged_loss_->newest() : std::nullopt; }

  std::uint64_t data_units() const override { return task_->data_units(); }
  std::uint64_t units_per_step() const override { return static_cast<std::uint64_t>(cfg_.batch_size); }
  void queue_units(const std::vector<std::uint64_t>& units) override { task_->queue_units(units); }

  step_result compute_gradients(std::int64_t) override {
    return {forward_backward().item<float>(), task_->tokens_per_batch()};
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

  void apply_gradients(std::int64_t step) override { optimizer_->step(learning_rate(step)); }

  std::size_t inner_state_size() const override { return optimizer_->state_size(); }
  std::int64_t read_inner_state(float* values) const override { return optimizer_->read_state(values); }
  void write_inner_state(const float* values, std::int64_t adam_step) override {
    optimizer_->write_state(values, adam_step);
  }

  float evaluate() override {
    torch::NoGradGuard no_grad;
    task_->set_training(false);
    autocast_scope autocast(bf16_);
    double total = 0;
    const auto& batches = task_->eval_batches();
    for (const auto& b : batches) total += task_->loss(on_device(b)).item<double>();
    return static_cast<float>(total / static_cast<double>(batches.size()));
  }

  // The outer-sync side: on the device when the replica trains on one, else the host
  // implementations of replica.
  void adopt_global(std::size_t f, const float* theta) override {
    if (on_device_) on_device_->adopt(f, theta);
    else replica::adopt_global(f, theta);
  }
  void merge_global(std::size_t f, const float* theta, float alpha) override {
    if (on_device_) on_device_->merge(f, theta, alpha);
    else replica::merge_global(f, theta, alpha);
  }
  status encode_pseudo_gradient(std::size_t f, const encoding& how, encoded_values& out) override {
    return on_device_ ? on_device_->encode(f, how, out) : replica::encode_pseudo_gradient(f, how, out);
  }
  float evaluate_global() override {
    return on_device_ ? on_device_->with_global([this] { return evaluate(); }) : replica::evaluate_global();
  }

 private:
  torch::Tensor forward_backward() {
    task_->set_training(true);
    optimizer_->zero_grad();
    torch::Tensor loss;
    {
      autocast_scope autocast(bf16_);
      loss = task_->loss(on_device(task_->next_train_batch()));
    }
    loss.backward();
    return loss.detach();
  }

  double learning_rate(std::int64_t step) const {
    if (step < cfg_.warmup_steps)
      return cfg_.lr * static_cast<double>(step + 1) / static_cast<double>(cfg_.warmup_steps);
    const double span = std::max<std::int64_t>(1, cfg_.steps - cfg_.warmup_steps);
    const double progress = std::min(1.0, static_cast<double>(step - cfg_.warmup_steps) / span);
    const double floor = cfg_.min_lr_ratio;
    return cfg_.lr * (floor + (1.0 - floor) * 0.5 * (1.0 + std::cos(M_PI * progress)));
  }

  // Host batches to the device: pinned, then an asynchronous copy ordered before the
  // kernels that read it.
  batch on_device(const batch& b) const {
    if (device_.is_cpu()) return b;
    const auto to = torch::TensorOptions().device(device_);
    return {b.inputs.pin_memory().to(to, /*non_blocking=*/true), b.targets.pin_memory().to(to, /*non_blocking=*/true)};
  }

  run_config cfg_;
  torch::Device device_;
  std::unique_ptr<task> task_;
  step_profiler profiler_;  // ATOLL_TORCH_PROFILE's window of steps, if set
  std::unique_ptr<inner_optimizer> optimizer_;
  std::vector<std::vector<torch::Tensor>> fragments_;
  std::unique_ptr<device_fragments> on_device_;  // set on a CUDA device
  std::optional<lagged_loss> lagged_loss_;  // set on a CUDA device
  bool bf16_ = false;
};

}  // namespace

replica_factory torch_replica_factory(const std::string& model_file) {
  return [model_file](const run_config& cfg, const replica_spec& spec) -> std::unique_ptr<replica> {
    replica_spec with_model = spec;
    with_model.model_file = model_file;
    return std::make_unique<torch_replica>(cfg, with_model, make_task(cfg, with_model));
  };
}

status check_task(const run_config& cfg, const std::string& model_file, std::uint32_t world_size, bool with_data) {
  replica_spec spec;
  spec.world_size = world_size;
  spec.with_data = with_data;
  spec.model_file = model_file;
  try {
    torch_replica r(cfg, spec, make_task(cfg, spec));
  } catch (const std::exception& e) {
    return error_of(e);
  }
  return {};
}

expected<std::vector<std::size_t>> model_fragment_sizes(const run_config& cfg, const std::string& model_file) {
  replica_spec spec;
  spec.with_data = false;
  spec.model_file = model_file;
  try {
    torch_replica r(cfg, spec, make_task(cfg, spec));
    std::vector<std::size_t> sizes;
    for (std::size_t f = 0; f < r.fragment_count(); ++f) sizes.push_back(r.fragment_size(f));
    return sizes;
  } catch (const std::exception& e) {
    return error_of(e);
  }
}

status export_model(const run_config& cfg, const std::string& model_file,
                    const std::vector<std::vector<float>>& fragments, const std::string& path) {
  replica_spec spec;
  spec.with_data = false;
  spec.model_file = model_file;
  try {
    auto t = make_task(cfg, spec);
    task* model = t.get();
    torch_replica r(cfg, spec, std::move(t));
    if (fragments.size() != r.fragment_count())
      return make_error(errc::tensor_mismatch, "the store has " + std::to_string(fragments.size()) +
                                                   " fragments, the model " + std::to_string(r.fragment_count()));
    for (std::size_t f = 0; f < fragments.size(); ++f) {
      if (fragments[f].size() != r.fragment_size(f))
        return make_error(errc::tensor_mismatch, "fragment " + std::to_string(f) + " has " +
                                                     std::to_string(fragments[f].size()) + " values, the model " +
                                                     std::to_string(r.fragment_size(f)));
      r.write_fragment(f, fragments[f].data());
    }
    model->save(path);
  } catch (const std::exception& e) {
    return error_of(e);
  }
  return {};
}

}  // namespace atl
