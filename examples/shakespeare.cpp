// The default example: a byte-level GPT on tinyshakespeare.txt.
// Token and position embeddings, pre-norm causal self-attention blocks, tied output head.
// 90/10 train/held-out split; worker `rank` of `world_size` samples windows from its own
// contiguous shard of the training bytes.
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>

#include <torch/version.h>

#include "examples/task.hpp"

namespace atl {
namespace {

struct block_impl : torch::nn::Module {
  block_impl(std::int64_t width, std::int64_t heads)
      : heads_(heads),
        ln1(register_module("ln1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        qkv(register_module("qkv", torch::nn::Linear(width, 3 * width))),
        proj(register_module("proj", torch::nn::Linear(width, width))),
        ln2(register_module("ln2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))),
        fc(register_module("fc", torch::nn::Linear(width, 4 * width))),
        fc_proj(register_module("fc_proj", torch::nn::Linear(4 * width, width))) {}

  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& causal_mask) {
    const auto b = x.size(0), t = x.size(1), c = x.size(2);
    auto qkv_out = qkv(ln1(x)).view({b, t, 3, heads_, c / heads_}).permute({2, 0, 3, 1, 4});
    auto q = qkv_out[0], k = qkv_out[1], v = qkv_out[2];
#if TORCH_VERSION_MAJOR >= 2
    // The fused kernel (flash attention on a GPU) computes the same causal softmax attention.
    (void)causal_mask;
    auto y = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
    auto att = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(c / heads_));
    att = torch::softmax(att.masked_fill(causal_mask.slice(0, 0, t).slice(1, 0, t), -INFINITY), -1);
    auto y = torch::matmul(att, v);
#endif
    y = y.transpose(1, 2).contiguous().view({b, t, c});
    auto h = x + proj(y);
    return h + fc_proj(torch::gelu(fc(ln2(h))));
  }

  std::int64_t heads_;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc, fc_proj;
};
TORCH_MODULE_IMPL(block, block_impl);

struct gpt_impl : torch::nn::Module {
  gpt_impl(std::int64_t layers, std::int64_t width, std::int64_t heads, std::int64_t context)
      : tok(register_module("tok", torch::nn::Embedding(256, width))),
        pos(register_module("pos", torch::nn::Embedding(context, width))),
        ln_f(register_module("ln_f", torch::nn::LayerNorm(torch::nn::LayerNormOptions({width})))) {
    for (std::int64_t i = 0; i < layers; ++i)
      blocks.push_back(register_module("block" + std::to_string(i), block(width, heads)));
    // True where attention is not allowed (future positions).
    mask = register_buffer("mask", torch::triu(torch::ones({context, context}, torch::kBool), 1));
    torch::NoGradGuard no_grad;
    for (auto& p : named_parameters()) {
      if (p.key().find("ln") != std::string::npos) continue;
      if (p.key().find("bias") != std::string::npos) p.value().zero_();
      else p.value().normal_(0.0, 0.02);
    }
  }

  torch::Tensor forward(const torch::Tensor& idx) {
    const auto t = idx.size(1);
    auto x = tok(idx) + pos(torch::arange(t, idx.options()));
    for (auto& b : blocks) x = b->forward(x, mask);
    return torch::matmul(ln_f(x), tok->weight.t());  // tied head
  }

  torch::nn::Embedding tok, pos;
  std::vector<block> blocks;
  torch::nn::LayerNorm ln_f;
  torch::Tensor mask;
};
TORCH_MODULE_IMPL(gpt, gpt_impl);

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path + " (set run.data_dir)");
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

class shakespeare_task : public task {
 public:
  shakespeare_task(const run_config& cfg, const replica_spec& spec)
      : cfg_(cfg),
        model_((torch::manual_seed(static_cast<std::uint64_t>(cfg.seed)),
                gpt(cfg.layers, cfg.width, cfg.heads, cfg.context))),
        rng_(static_cast<std::uint64_t>(cfg.seed) * 1000003u + spec.rank) {
    const std::string text = read_file(data_dir(cfg) + "/tinyshakespeare.txt");
    auto all = torch::from_blob(const_cast<char*>(text.data()), {static_cast<std::int64_t>(text.size())}, torch::kUInt8)
                   .to(torch::kLong);
    const auto n = all.size(0);
    const auto split = n * 9 / 10;
    const auto shard = split / spec.world_size;
    train_ = all.slice(0, shard * spec.rank, shard * (spec.rank + 1)).clone();
    auto val = all.slice(0, split, n);
    if (train_.size(0) <= cfg.context + 1) throw std::runtime_error("data shard smaller than the context");
    // Fixed, evenly spaced held-out windows: every run and worker evaluates the same bytes.
    const auto windows = cfg.eval_batches * cfg.batch_size;
    const auto stride = std::max<std::int64_t>(1, (val.size(0) - cfg.context - 1) / windows);
    for (std::int64_t b = 0; b < cfg.eval_batches; ++b) {
      std::vector<torch::Tensor> xs;
      for (std::int64_t i = 0; i < cfg.batch_size; ++i) {
        const auto start = ((b * cfg.batch_size + i) * stride) % (val.size(0) - cfg.context - 1);
        xs.push_back(val.slice(0, start, start + cfg.context + 1));
      }
      auto w = torch::stack(xs);
      eval_.push_back({w.slice(1, 0, cfg.context), w.slice(1, 1, cfg.context + 1)});
    }
  }

  torch::nn::Module& model() override { return *model_; }

  std::vector<std::vector<torch::Tensor>> layer_groups() override {
    std::vector<std::vector<torch::Tensor>> groups;
    groups.push_back({model_->tok->weight, model_->pos->weight});  // embeddings (and tied head)
    for (auto& b : model_->blocks) groups.push_back(b->parameters());
    groups.push_back(model_->ln_f->parameters());  // head
    return groups;
  }

  batch next_train_batch() override {
    std::uniform_int_distribution<std::int64_t> pick(0, train_.size(0) - cfg_.context - 2);
    std::vector<torch::Tensor> xs;
    for (std::int64_t i = 0; i < cfg_.batch_size; ++i) {
      const auto start = pick(rng_);
      xs.push_back(train_.slice(0, start, start + cfg_.context + 1));
    }
    auto w = torch::stack(xs);
    return {w.slice(1, 0, cfg_.context), w.slice(1, 1, cfg_.context + 1)};
  }

  const std::vector<batch>& eval_batches() override { return eval_; }

  torch::Tensor loss(const batch& b) override {
    auto logits = model_->forward(b.inputs);
    return torch::nn::functional::cross_entropy(logits.view({-1, 256}), b.targets.reshape({-1}));
  }

  std::int64_t tokens_per_batch() const override { return cfg_.batch_size * cfg_.context; }

 private:
  run_config cfg_;
  gpt model_;
  std::mt19937_64 rng_;
  torch::Tensor train_;
  std::vector<batch> eval_;
};

ATOLL_REGISTER_TASK("shakespeare", [](const run_config& cfg, const replica_spec& spec) {
  return std::make_unique<shakespeare_task>(cfg, spec);
});

}  // namespace
}  // namespace atl
