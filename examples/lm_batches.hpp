#pragma once
// Token windows as LibTorch batches for language-model tasks: inputs are a window's first
// `context` tokens, targets the same shifted by one. Include only from LibTorch code.
#include <random>
#include <vector>

#include "examples/task.hpp"
#include "examples/token_data.hpp"

namespace atl {

class lm_batches {
 public:
  // Throws task_error (errc::bad_data) for an unusable file.
  lm_batches(const token_windows_spec& spec, std::uint64_t seed);

  // Throws task_error when the file no longer holds the batch (truncated since open).
  batch next_train_batch();
  const std::vector<batch>& eval_batches() const { return eval_; }
  std::int64_t tokens_per_batch() const;

 private:
  batch to_batch(std::vector<std::int64_t> windows) const;

  token_windows windows_;
  std::mt19937_64 rng_;
  std::vector<batch> eval_;
};

}  // namespace atl
