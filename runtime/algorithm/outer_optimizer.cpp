#include "runtime/algorithm/outer_optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

namespace atl {

void nesterov_step(const outer_options& opt, float* theta, float* momentum_buffer, const float* grad, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float buf = opt.momentum * momentum_buffer[i] + grad[i];
    momentum_buffer[i] = buf;
    theta[i] -= opt.lr * (grad[i] + opt.momentum * buf);
  }
}

void momentum_after_change(const outer_options& opt, float* momentum_buffer, const float* change, std::size_t n) {
  const float mu = opt.momentum;
  const float mu_squared = mu * mu;
  const float one_plus_mu = 1.0f + mu;
  for (std::size_t i = 0; i < n; ++i) {
    const float grad = opt.lr == 0.0f ? 0.0f : (-change[i] / opt.lr - mu_squared * momentum_buffer[i]) / one_plus_mu;
    momentum_buffer[i] = mu * momentum_buffer[i] + grad;
  }
}

expected<std::vector<float>> normalised_weights(const std::vector<weighted_input>& inputs) {
  if (inputs.empty()) return make_error(errc::not_ready, "no contributions to average");
  float total = 0.0f;
  for (const auto& in : inputs) {
    if (!(in.weight > 0.0f) || !std::isfinite(in.weight))
      return make_error(errc::not_finite, "contribution weight " + std::to_string(in.weight));
    total += in.weight;
  }
  std::vector<float> weights;
  for (const auto& in : inputs) weights.push_back(in.weight / total);
  return weights;
}

status weighted_average(const std::vector<weighted_input>& inputs, std::size_t n, std::vector<float>& out) {
  auto weights = normalised_weights(inputs);
  if (!weights) return weights.err();
  for (const auto& in : inputs)
    if (in.encoded) return make_error(errc::invalid_config, "weighted_average takes decoded inputs");
  out.assign(n, 0.0f);
  for (std::size_t k = 0; k < inputs.size(); ++k) {
    const float w = (*weights)[k];
    const float* x = inputs[k].values;
    for (std::size_t i = 0; i < n; ++i) out[i] += w * x[i];
  }
  return {};
}

// Block by block, so the test of a block vectorises (an early exit at each value does
// not); a value is not finite when its exponent bits are all ones.
bool all_finite(const float* values, std::size_t n) {
  constexpr std::size_t block = 256;
  for (std::size_t start = 0; start < n; start += block) {
    const std::size_t end = std::min(n, start + block);
    std::uint32_t largest_exponent = 0;
    for (std::size_t i = start; i < end; ++i) {
      std::uint32_t bits;
      std::memcpy(&bits, values + i, sizeof bits);
      const std::uint32_t exponent = bits & 0x7f800000u;
      largest_exponent = largest_exponent > exponent ? largest_exponent : exponent;
    }
    if (largest_exponent == 0x7f800000u) return false;
  }
  return true;
}

}  // namespace atl
