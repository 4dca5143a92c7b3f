#pragma once
// A deterministic stand-in for a LibTorch replica in the protocol tiers: 97 parameters that
// drift differently on each rank (so averaging has real work to do), split into
// `fragments` contiguous fragments.
#include <cmath>
#include <cstring>
#include <vector>

#include "actors/replica.hpp"

namespace atl::testing {

class fake_replica : public replica {
 public:
  explicit fake_replica(std::uint32_t rank, std::size_t fragments = 1) : rank_(rank), params_(97) {
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
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= drift(i, step);
    return {params_[0], 1};
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
  std::vector<float> params_, grads_;
  std::vector<std::size_t> bounds_;  // fragment f is [bounds_[f], bounds_[f + 1])
};

}  // namespace atl::testing
