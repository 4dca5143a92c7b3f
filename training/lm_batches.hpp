#pragma once
// Token windows as LibTorch batches for language-model tasks: inputs are a window's first
// `context` tokens, targets the same shifted by one. Include only from LibTorch code.
#include <deque>
#include <random>
#include <vector>

#include "training/task.hpp"
#include "training/token_data.hpp"

namespace atl {

class lm_batches {
 public:
  // Throws task_error (errc::bad_data) for an unusable file.
  lm_batches(const token_windows_spec& spec, std::uint64_t seed);

  // Throws task_error when the file no longer holds the batch (truncated since open), or
  // when units were queued once and fewer than a batch are left (the worker queues ahead).
  batch next_train_batch();
  // The data cursor's units: the training part's non-overlapping windows (token_windows).
  std::uint64_t units() const { return windows_.train_units(); }
  void queue_units(const std::vector<std::uint64_t>& units);
  const std::vector<batch>& eval_batches() const { return eval_; }
  std::int64_t tokens_per_batch() const;

 private:
  batch to_batch(std::vector<std::int64_t> windows) const;

  token_windows windows_;
  std::mt19937_64 rng_;
  std::vector<batch> eval_;
  bool from_cursor_ = false;  // units were queued: every batch is the next of them
  std::deque<std::uint64_t> queued_;
};

}  // namespace atl
