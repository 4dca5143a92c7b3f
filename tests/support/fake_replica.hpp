#pragma once
// A deterministic stand-in for a LibTorch replica in the protocol tiers: 97 parameters that
// drift differently on each rank (so averaging has real work to do), split into
// `fragments` contiguous fragments, and an inner-optimizer state (two moments a parameter
// and a step count) that follows the steps, for warm joiners to take.
#include <cmath>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "actors/worker/replica.hpp"
#include "runtime/core/digest.hpp"

namespace atl::testing {

// What every replica of a run lent and installed of its inner-optimizer state, by digest:
// an installed state must be one some donor lent (read) before.
struct inner_state_ledger {
  std::set<std::uint64_t> lent;
  std::uint64_t installed = 0, installed_unlent = 0;
};

class fake_replica : public replica {
 public:
  // `values`: the model's parameters (97 unless a test needs more, such as fragments cut
  // into slices of whole outer-step blocks).
  explicit fake_replica(std::uint32_t rank, std::size_t fragments = 1,
                        std::shared_ptr<inner_state_ledger> ledger = nullptr, std::size_t values = 97)
      : rank_(rank), params_(values), moments_(2 * values), ledger_(std::move(ledger)) {
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i] = 0.01f * static_cast<float>(i);
    for (std::size_t f = 0; f <= fragments; ++f) bounds_.push_back(f * params_.size() / fragments);
  }
  std::size_t fragment_count() const override { return bounds_.size() - 1; }
  std::size_t fragment_size(std::size_t f) const override { return bounds_[f + 1] - bounds_[f]; }
  void read_fragment(std::size_t f, float* v) const override {
    std::memcpy(v, params_.data() + bounds_[f], fragment_size(f) * sizeof(float));
  }
  void write_fragment(std::size_t f, const float* v) override {
    std::memcpy(params_.data() + bounds_[f], v, fragment_size(f) * sizeof(float));
  }
  step_result train_step(std::int64_t step) override {
    for (std::size_t i = 0; i < params_.size(); ++i) {
      params_[i] -= drift(i, step);
      moments_[i] = 0.9f * moments_[i] + drift(i, step);
      moments_[params_.size() + i] = 0.95f * moments_[params_.size() + i] + drift(i, step) * drift(i, step);
    }
    ++inner_step_;
    return {params_[0], 1};
  }
  std::size_t inner_state_size() const override { return moments_.size(); }
  std::int64_t read_inner_state(float* v) const override {
    std::memcpy(v, moments_.data(), moments_.size() * sizeof(float));
    if (ledger_) ledger_->lent.insert(digest64(v, moments_.size() * sizeof(float)));
    return inner_step_;
  }
  void write_inner_state(const float* v, std::int64_t step) override {
    std::memcpy(moments_.data(), v, moments_.size() * sizeof(float));
    inner_step_ = step;
    if (!ledger_) return;
    ledger_->installed++;
    if (!ledger_->lent.count(digest64(v, moments_.size() * sizeof(float)))) ledger_->installed_unlent++;
  }
  float evaluate() override { return std::fabs(params_[1]); }
  step_result compute_gradients(std::int64_t step) override {
    grads_.resize(params_.size());
    for (std::size_t i = 0; i < grads_.size(); ++i) grads_[i] = drift(i, step);
    return {params_[0], 1};
  }
  void read_gradients(std::size_t f, float* v) const override {
    std::memcpy(v, grads_.data() + bounds_[f], fragment_size(f) * sizeof(float));
  }
  void write_gradients(std::size_t f, const float* v) override {
    std::memcpy(grads_.data() + bounds_[f], v, fragment_size(f) * sizeof(float));
  }
  void apply_gradients(std::int64_t) override {
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= grads_[i];
  }

 private:
  float drift(std::size_t i, std::int64_t step) const {
    return 0.01f * static_cast<float>(rank_ + 1) * std::sin(static_cast<float>(i + static_cast<std::size_t>(step)));
  }

  std::uint32_t rank_;
  std::vector<float> params_, grads_, moments_;
  std::int64_t inner_step_ = 0;
  std::shared_ptr<inner_state_ledger> ledger_;
  std::vector<std::size_t> bounds_;  // fragment f is [bounds_[f], bounds_[f + 1])
};

// A fake replica of a token task: `units` units of data, two a step (its worker leases
// them from the run's data cursor).
class leasing_replica : public fake_replica {
 public:
  leasing_replica(std::uint32_t rank, std::uint64_t units, std::size_t fragments = 1,
                  std::shared_ptr<inner_state_ledger> ledger = nullptr, std::size_t values = 97)
      : fake_replica(rank, fragments, std::move(ledger), values), units_(units) {}
  std::uint64_t data_units() const override { return units_; }
  std::uint64_t units_per_step() const override { return 2; }

 private:
  std::uint64_t units_;
};

}  // namespace atl::testing
