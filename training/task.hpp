#pragma once
// A training task: model, data and loss, registered by name. Include this (it pulls in
// LibTorch) only from task implementations; everything else uses training/tasks.hpp.
//
// Adding a task: write training/my_task.cpp with a class deriving from atl::task and
//   ATOLL_REGISTER_TASK("my_task", [](const atl::run_config& cfg, const atl::replica_spec& s) {
//     return std::make_unique<my_task>(cfg, s);
//   });
// add the file to training/CMakeLists.txt, and run with `--example my_task`.
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "actors/worker/replica.hpp"

namespace atl {

struct batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class task {
 public:
  virtual ~task() = default;
  // The model: its parameters (every one in exactly one layer group), where it runs, and
  // whether it is in training mode (dropout and the like).
  virtual std::vector<torch::Tensor> parameters() = 0;
  virtual void to(const torch::Device& device) = 0;
  virtual void set_training(bool on) = 0;
  // Parameter groups in layer order (embedding, blocks..., head); fragments are made of
  // whole groups. Every worker must return the same groups in the same order.
  virtual std::vector<std::vector<torch::Tensor>> layer_groups() = 0;
  virtual batch next_train_batch() = 0;  // from this worker's shard, or the units queued
  // The run's data cursor (docs/design.md, "Every sample once"): how many units the task's
  // training data has (0: it samples its own and takes no units), and the units its next
  // batches train, in order (once any is queued, every batch takes the next ones).
  virtual std::uint64_t data_units() const { return 0; }
  virtual void queue_units(const std::vector<std::uint64_t>&) {}
  virtual const std::vector<batch>& eval_batches() = 0;  // fixed held-out batches
  virtual torch::Tensor loss(const batch& b) = 0;
  virtual std::int64_t tokens_per_batch() const = 0;
  // Writes the model with its current parameters to `path` in a form PyTorch loads
  // (`atoll export`): a TorchScript module for --model runs, a state dict otherwise.
  virtual void save(const std::string& path) = 0;
};

// A task whose model is a torch::nn::Module (the built-in examples). It saves the
// module's state dict (parameters and buffers by name) in the format of torch.save, so
// `torch.load(FILE)` in Python gives a dict of tensors.
class module_task : public task {
 public:
  std::vector<torch::Tensor> parameters() override { return module().parameters(); }
  void to(const torch::Device& device) override { module().to(device); }
  void set_training(bool on) override { module().train(on); }
  void save(const std::string& path) override;

 protected:
  virtual torch::nn::Module& module() = 0;
};

// A typed error out of task code, where failing means throwing (as LibTorch does).
class task_error : public std::runtime_error {
 public:
  explicit task_error(error e) : std::runtime_error(e.describe()), err(std::move(e)) {}
  error err;
};
// The error an exception out of task code stands for: a task_error's own, invalid_config
// for std::invalid_argument, bad_model for anything else (LibTorch's c10::Error included).
error error_of(const std::exception& e);

// Writes tensors by name in the format of torch.save (a dict of CPU tensors), so that
// `torch.load(FILE)` in Python gives them back. Throws task_error when it cannot write.
void save_state_dict(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& path);

using task_factory = std::function<std::unique_ptr<task>(const run_config&, const replica_spec&)>;

// Returns true so it can initialise a static; see ATOLL_REGISTER_TASK.
bool register_task(const std::string& name, task_factory factory);
std::unique_ptr<task> make_task(const run_config& cfg, const replica_spec& spec);

// The example's own data file (tinyshakespeare.txt) when run.data is empty.
std::string default_data_file(const run_config& cfg);

// Where the example data lives: cfg.data_dir, else the source tree's examples/data.
std::string data_dir(const run_config& cfg);

}  // namespace atl

#define ATOLL_REGISTER_TASK_CAT2(a, b) a##b
#define ATOLL_REGISTER_TASK_CAT(a, b) ATOLL_REGISTER_TASK_CAT2(a, b)
#define ATOLL_REGISTER_TASK(name, factory) \
  static const bool ATOLL_REGISTER_TASK_CAT(atoll_task_registered_, __LINE__) = ::atl::register_task(name, factory)
