// A model the user wrote in PyTorch, exported with torch.jit.script or torch.jit.trace and
// trained with `atoll local|up --model FILE.pt` (run.example = torchscript). The contract
// (README, "Your own model"):
//   - forward(x) takes int64 token ids [B, T] and returns logits [B, T, V]; Atoll computes
//     the next-token cross-entropy. V must equal the data's vocabulary; T is model.context.
//     Both are checked with one forward pass when the task is built, before training.
//   - Layer groups (what fragments are made of) are the module's own parameters, if it has
//     any, then each top-level child's, in order; a top-level nn.ModuleList or
//     nn.Sequential counts child by child. A parameter shared by two children (tied
//     weights) belongs to the first.
//   - Buffers are local: each worker keeps the ones in the file (they are not synced, and
//     the export writes the file's).
//   - Parameters come from the file, so every worker starts from the same ones; the head
//     checks that every node holds the same file (model.digest).
#include <set>

#include <torch/script.h>

#include "training/fragment_tensors.hpp"
#include "training/lm_batches.hpp"
#include "training/task.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

torch::jit::Module load_module(const std::string& path) {
  if (path.empty())
    throw task_error(make_error(errc::bad_model, "run.example = torchscript needs a model file (--model FILE.pt)"));
  try {
    return torch::jit::load(path, torch::kCPU);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw task_error(make_error(errc::bad_model, path +
                                                     ": not a TorchScript module (export it with torch.jit.script "
                                                     "or torch.jit.trace and save it): " +
                                                     what.substr(0, what.find('\n'))));
  }
}

// The width V of the logits forward() returns for [1, context] tokens; refuses any other
// shape.
std::int64_t output_vocab(torch::jit::Module& m, const std::string& path, std::int64_t context) {
  torch::NoGradGuard no_grad;
  m.eval();
  torch::jit::IValue out;
  try {
    out = m.forward({torch::zeros({1, context}, torch::kLong)});
  } catch (const std::exception& e) {
    const std::string what = e.what();
    throw task_error(make_error(errc::bad_model, path + ": forward() fails on int64 token ids of shape [1, " +
                                                     std::to_string(context) +
                                                     "]: " + what.substr(0, what.find('\n'))));
  }
  if (!out.isTensor())
    throw task_error(make_error(errc::bad_model,
                                path + ": forward() must return a tensor of logits [B, T, V], not " + out.tagKind()));
  const auto logits = out.toTensor();
  if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != context || !logits.is_floating_point())
    throw task_error(make_error(
        errc::bad_model, path + ": forward() on [1, " + std::to_string(context) +
                             "] token ids must return float logits [1, " + std::to_string(context) + ", V], not " +
                             std::string(c10::toString(logits.scalar_type())) + " " + c10::str(logits.sizes())));
  return logits.size(2);
}

// nn.ModuleList and nn.Sequential: the blocks of a model usually sit in one, and each
// block should be a layer group of its own.
bool is_container(const torch::jit::Module& m) {
  const auto name = m.type()->name();
  if (!name) return false;
  const auto qualified = name->qualifiedName();
  return qualified.find("torch.nn.modules.container") != std::string::npos &&
         (name->name() == "ModuleList" || name->name() == "Sequential");
}

// The module's parameters in layer groups, named as named_parameters() names them: its
// own, then each top-level child's (a container's child by child). A parameter shared by
// two children (tied weights) belongs to the first. python/atoll's parameter_groups
// makes the same groups of the same module in Python.
struct named_groups {
  std::vector<std::vector<torch::Tensor>> tensors;
  std::vector<std::vector<std::string>> names;
};
named_groups layer_groups_of(const torch::jit::Module& module) {
  std::set<std::pair<const void*, std::vector<std::int64_t>>> taken;  // memory and shape
  named_groups groups;
  auto add_group = [&](const std::string& prefix, auto named_params) {
    std::vector<torch::Tensor> group;
    std::vector<std::string> names;
    for (const auto& p : named_params)
      if (taken.insert({p.value.data_ptr(), p.value.sizes().vec()}).second) {
        group.push_back(p.value);
        names.push_back(prefix + p.name);
      }
    if (group.empty()) return;
    groups.tensors.push_back(std::move(group));
    groups.names.push_back(std::move(names));
  };
  add_group("", module.named_parameters(/*recurse=*/false));
  for (const auto& child : module.named_children()) {
    if (!is_container(child.value)) {
      add_group(child.name + ".", child.value.named_parameters());
      continue;
    }
    add_group(child.name + ".", child.value.named_parameters(/*recurse=*/false));
    for (const auto& item : child.value.named_children())
      add_group(child.name + "." + item.name + ".", item.value.named_parameters());
  }
  return groups;
}

class torchscript_task : public task {
 public:
  torchscript_task(const run_config& cfg, const replica_spec& spec) : module_(load_module(spec.model_file)) {
    auto vocab = resolve_vocab(cfg, static_cast<std::uint64_t>(output_vocab(module_, spec.model_file, cfg.context)));
    if (!vocab) throw task_error(vocab.err());
    vocab_ = static_cast<std::int64_t>(*vocab);
    for (auto p : module_.parameters()) p.requires_grad_(true);
    if (spec.with_data)
      data_ =
          std::make_unique<lm_batches>(windows_spec(cfg, default_data_file(cfg), *vocab, spec.rank, spec.world_size),
                                       static_cast<std::uint64_t>(cfg.seed));
  }

  // Each parameter once, even when tied ones come back from the file as two tensors over
  // one storage: the optimizer must not step shared memory twice.
  std::vector<torch::Tensor> parameters() override {
    std::vector<torch::Tensor> out;
    for (auto& group : layer_groups())
      for (auto& p : group) out.push_back(p);
    return out;
  }
  void to(const torch::Device& device) override { module_.to(device); }
  void set_training(bool on) override { module_.train(on); }

  std::vector<std::vector<torch::Tensor>> layer_groups() override { return layer_groups_of(module_).tensors; }

  batch next_train_batch() override { return data_->next_train_batch(); }
  const std::vector<batch>& eval_batches() override { return data_->eval_batches(); }

  torch::Tensor loss(const batch& b) override {
    auto logits = module_.forward({b.inputs}).toTensor();
    return torch::nn::functional::cross_entropy(logits.reshape({-1, vocab_}), b.targets.reshape({-1}));
  }

  std::int64_t tokens_per_batch() const override { return data_->tokens_per_batch(); }

  void save(const std::string& path) override { module_.save(path); }

 private:
  torch::jit::Module module_;
  std::int64_t vocab_ = 0;
  std::unique_ptr<lm_batches> data_;  // null when built without data (export)
};

ATOLL_REGISTER_TASK("torchscript", [](const run_config& cfg, const replica_spec& spec) {
  return std::make_unique<torchscript_task>(cfg, spec);
});

}  // namespace

expected<std::string> torchscript_signature(const std::string& model_file) {
  try {
    const auto groups = layer_groups_of(load_module(model_file));
    return signature_of_groups(groups.tensors, groups.names);
  } catch (const task_error& e) {
    return e.err;
  }
}

}  // namespace atl
