#pragma once
// A training task: model, data and loss, registered by name. Include this (it pulls in
// LibTorch) only from task implementations; everything else uses examples/tasks.hpp.
//
// Adding a task: write examples/my_task.cpp with a class deriving from atl::task and
//   ATOLL_REGISTER_TASK("my_task", [](const atl::run_config& cfg, const atl::replica_spec& s) {
//     return std::make_unique<my_task>(cfg, s);
//   });
// add the file to examples/CMakeLists.txt, and run with `--example my_task`.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "actors/replica.hpp"

namespace atl {

struct batch {
  torch::Tensor inputs;
  torch::Tensor targets;
};

class task {
 public:
  virtual ~task() = default;
  virtual torch::nn::Module& model() = 0;
  // Parameter groups in layer order (embedding, blocks..., head); fragments are made of
  // whole groups. Every worker must return the same groups in the same order.
  virtual std::vector<std::vector<torch::Tensor>> layer_groups() = 0;
  virtual batch next_train_batch() = 0;  // from this worker's shard
  virtual const std::vector<batch>& eval_batches() = 0;  // fixed held-out batches
  virtual torch::Tensor loss(const batch& b) = 0;
  virtual std::int64_t tokens_per_batch() const = 0;
};

using task_factory = std::function<std::unique_ptr<task>(const run_config&, const replica_spec&)>;

// Returns true so it can initialise a static; see ATOLL_REGISTER_TASK.
bool register_task(const std::string& name, task_factory factory);
std::unique_ptr<task> make_task(const run_config& cfg, const replica_spec& spec);

// Where the example data lives: cfg.data_dir, else the source tree's examples/data.
std::string data_dir(const run_config& cfg);

}  // namespace atl

#define ATOLL_REGISTER_TASK_CAT2(a, b) a##b
#define ATOLL_REGISTER_TASK_CAT(a, b) ATOLL_REGISTER_TASK_CAT2(a, b)
#define ATOLL_REGISTER_TASK(name, factory) \
  static const bool ATOLL_REGISTER_TASK_CAT(atoll_task_registered_, __LINE__) = ::atl::register_task(name, factory)
