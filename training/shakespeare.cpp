// The default example: a GPT on tinyshakespeare.txt as bytes, or on any token file
// (run.data, run.data_format, run.vocab: training/token_data.hpp).
// Token and position embeddings, pre-norm causal self-attention blocks, tied output head.
// 90/10 train/held-out split; worker `rank` of `world_size` samples windows from its own
// contiguous shard of the training tokens.
#include <cmath>
#include <stdexcept>

#include <torch/version.h>

#include "training/lm_batches.hpp"
#include "training/task.hpp"

namespace atl {
namespace {

// A linear layer as PyTorch's F.linear computes it (aten::linear): on a batch of sequences
// one matrix product with the bias added in its epilogue, and under autocast the bias cast
// with the weight. The C++ frontend's Linear::forward computes a 3-D input's product, then
// adds the fp32 bias to the bf16 product in a kernel of its own (with the three selects
// below, 7.3 of the 39.3 ms of kernels in a step of the 86M example on an H200, by the
// profiler: docs/benchmarks.md).
torch::Tensor linear(const torch::nn::Linear& layer, const torch::Tensor& x) {
  return at::linear(x, layer->weight, layer->bias);
}

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
    // unbind, as Python's `q, k, v = ...` does: its backward writes the three gradients into
    // one tensor, where three selects would each zero a full-size gradient and add them.
    const auto qkv_out = linear(qkv, ln1(x)).view({b, t, 3, heads_, c / heads_}).permute({2, 0, 3, 1, 4}).unbind(0);
    const auto& q = qkv_out[0];
    const auto& k = qkv_out[1];
    const auto& v = qkv_out[2];
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
    auto h = x + linear(proj, y);
    return h + linear(fc_proj, torch::gelu(linear(fc, ln2(h))));
  }

  std::int64_t heads_;
  torch::nn::LayerNorm ln1;
  torch::nn::Linear qkv, proj;
  torch::nn::LayerNorm ln2;
  torch::nn::Linear fc, fc_proj;
};
TORCH_MODULE_IMPL(block, block_impl);

struct gpt_impl : torch::nn::Module {
  gpt_impl(std::int64_t vocab, std::int64_t layers, std::int64_t width, std::int64_t heads, std::int64_t context)
      : tok(register_module("tok", torch::nn::Embedding(vocab, width))),
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

std::uint64_t vocab_or_throw(const run_config& cfg) {
  auto vocab = resolve_vocab(cfg, 0);
  if (!vocab) throw task_error(vocab.err());
  return *vocab;
}

class shakespeare_task : public module_task {
 public:
  shakespeare_task(const run_config& cfg, const replica_spec& spec)
      : vocab_(static_cast<std::int64_t>(vocab_or_throw(cfg))),
        model_((torch::manual_seed(static_cast<std::uint64_t>(cfg.seed)),
                gpt(vocab_, cfg.layers, cfg.width, cfg.heads, cfg.context))) {
    if (spec.with_data)
      data_ = std::make_unique<lm_batches>(
          windows_spec(cfg, default_data_file(cfg), static_cast<std::uint64_t>(vocab_), spec.rank, spec.world_size),
          static_cast<std::uint64_t>(cfg.seed));
  }

  std::vector<std::vector<torch::Tensor>> layer_groups() override {
    std::vector<std::vector<torch::Tensor>> groups;
    groups.push_back({model_->tok->weight, model_->pos->weight});  // embeddings (and tied head)
    for (auto& b : model_->blocks) groups.push_back(b->parameters());
    groups.push_back(model_->ln_f->parameters());  // head
    return groups;
  }

  batch next_train_batch() override { return data_->next_train_batch(); }
  std::uint64_t data_units() const override { return data_ ? data_->units() : 0; }
  void queue_units(const std::vector<std::uint64_t>& units) override { data_->queue_units(units); }
  const std::vector<batch>& eval_batches() override { return data_->eval_batches(); }

  torch::Tensor loss(const batch& b) override {
    auto logits = model_->forward(b.inputs);
    return torch::nn::functional::cross_entropy(logits.view({-1, vocab_}), b.targets.reshape({-1}));
  }

  std::int64_t tokens_per_batch() const override { return data_->tokens_per_batch(); }

 protected:
  torch::nn::Module& module() override { return *model_; }

 private:
  std::int64_t vocab_;
  gpt model_;
  std::unique_ptr<lm_batches> data_;  // null when built without data (export)
};

ATOLL_REGISTER_TASK("shakespeare", [](const run_config& cfg, const replica_spec& spec) {
  return std::make_unique<shakespeare_task>(cfg, spec);
});

}  // namespace
}  // namespace atl
