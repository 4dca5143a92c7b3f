#pragma once
// The stand-in for a model in `atoll_sim_nodes`: a few hundred fp32 values that drift a
// little each step, and a step that only waits (`step_ms`), so that a simulated node's
// worker joins fragments and contributes at a set rate without LibTorch or any compute.
// Everything past the replica (the worker actor, the node agent, the links) is the real one.
#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>

#include "actors/worker/replica.hpp"

namespace atl::sim {

class standin_replica : public replica {
 public:
  standin_replica(std::size_t values, std::size_t fragments, std::chrono::milliseconds step_time, std::uint32_t rank)
      : values_(std::max(values, fragments)), step_time_(step_time), rank_(rank) {
    for (std::size_t f = 0; f <= fragments; ++f) bounds_.push_back(f * values_.size() / fragments);
  }
  std::size_t fragment_count() const override { return bounds_.size() - 1; }
  std::size_t fragment_size(std::size_t f) const override { return bounds_[f + 1] - bounds_[f]; }
  void read_fragment(std::size_t f, float* out) const override {
    std::memcpy(out, values_.data() + bounds_[f], fragment_size(f) * sizeof(float));
  }
  void write_fragment(std::size_t f, const float* in) override {
    std::memcpy(values_.data() + bounds_[f], in, fragment_size(f) * sizeof(float));
  }
  step_result train_step(std::int64_t step) override {
    std::this_thread::sleep_for(step_time_);
    nudge(values_, step);
    return {1.0f, 1};
  }
  step_result compute_gradients(std::int64_t step) override {
    std::this_thread::sleep_for(step_time_);
    gradients_.assign(values_.size(), 0.0f);
    nudge(gradients_, step);
    return {1.0f, 1};
  }
  void read_gradients(std::size_t f, float* out) const override {
    std::memcpy(out, gradients_.data() + bounds_[f], fragment_size(f) * sizeof(float));
  }
  void write_gradients(std::size_t f, const float* in) override {
    std::memcpy(gradients_.data() + bounds_[f], in, fragment_size(f) * sizeof(float));
  }
  void apply_gradients(std::int64_t) override {
    for (std::size_t i = 0; i < values_.size(); ++i) values_[i] -= gradients_[i];
  }
  float evaluate() override { return 1.0f; }

 private:
  // A small change that differs by rank, so that rounds average something.
  void nudge(std::vector<float>& v, std::int64_t step) const {
    const float by = 1e-3f * static_cast<float>(rank_ % 7 + 1);
    for (std::size_t i = 0; i < v.size(); i += 16)
      v[i] += by * std::sin(static_cast<float>(step + static_cast<std::int64_t>(i)));
  }

  std::vector<float> values_, gradients_;
  std::vector<std::size_t> bounds_;  // fragment f is [bounds_[f], bounds_[f + 1])
  std::chrono::milliseconds step_time_;
  std::uint32_t rank_;
};

}  // namespace atl::sim
