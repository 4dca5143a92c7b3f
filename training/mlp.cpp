// A tiny regression task for fast tests: a 2-layer MLP learns a fixed random teacher
// y = tanh(x A) b from 16-dimensional Gaussian inputs. Everything is synthetic and seeded;
// each worker draws its own samples (rank-seeded), eval uses one fixed held-out set.
#include <random>

#include "training/task.hpp"

namespace atl {
namespace {

constexpr std::int64_t input_dim = 16;
constexpr std::int64_t teacher_hidden = 8;

class mlp_task : public module_task {
 public:
  mlp_task(const run_config& cfg, const replica_spec& spec) : cfg_(cfg) {
    torch::manual_seed(static_cast<std::uint64_t>(cfg.seed));
    model_ = torch::nn::Sequential(torch::nn::Linear(input_dim, cfg.width), torch::nn::Tanh(),
                                   torch::nn::Linear(cfg.width, 1));
    teacher_a_ = torch::randn({input_dim, teacher_hidden});
    teacher_b_ = torch::randn({teacher_hidden, 1}) / std::sqrt(static_cast<double>(teacher_hidden));
    gen_ = torch::make_generator<torch::CPUGeneratorImpl>(static_cast<std::uint64_t>(cfg.seed) * 7919u + spec.rank + 1);
    auto eval_gen = torch::make_generator<torch::CPUGeneratorImpl>(static_cast<std::uint64_t>(cfg.seed) + 424242u);
    for (std::int64_t i = 0; i < cfg.eval_batches; ++i) eval_.push_back(sample(eval_gen));
  }

  std::vector<std::vector<torch::Tensor>> layer_groups() override {
    return {model_[0]->parameters(), model_[2]->parameters()};
  }
  batch next_train_batch() override { return sample(gen_); }
  const std::vector<batch>& eval_batches() override { return eval_; }
  torch::Tensor loss(const batch& b) override { return torch::mse_loss(model_->forward(b.inputs), b.targets); }
  std::int64_t tokens_per_batch() const override { return cfg_.batch_size; }

 protected:
  torch::nn::Module& module() override { return *model_; }

 private:
  batch sample(torch::Generator& gen) {
    auto x = torch::randn({cfg_.batch_size, input_dim}, gen);
    return {x, torch::tanh(torch::matmul(x, teacher_a_)).matmul(teacher_b_)};
  }

  run_config cfg_;
  torch::nn::Sequential model_{nullptr};
  torch::Tensor teacher_a_, teacher_b_;
  torch::Generator gen_;
  std::vector<batch> eval_;
};

ATOLL_REGISTER_TASK("mlp", [](const run_config& cfg, const replica_spec& spec) {
  return std::make_unique<mlp_task>(cfg, spec);
});

}  // namespace
}  // namespace atl
