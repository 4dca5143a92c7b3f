#include "runtime/algorithm/outer_optimizer.hpp"

#include <cmath>
#include <string>

namespace atl {

void nesterov_step(const outer_options& opt, float* theta, float* momentum_buffer, const float* grad, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const float buf = opt.momentum * momentum_buffer[i] + grad[i];
    momentum_buffer[i] = buf;
    theta[i] -= opt.lr * (grad[i] + opt.momentum * buf);
  }
}

status weighted_average(const std::vector<weighted_input>& inputs, std::size_t n, std::vector<float>& out) {
  if (inputs.empty()) return make_error(errc::not_ready, "no contributions to average");
  float total = 0.0f;
  for (const auto& in : inputs) {
    if (!(in.weight > 0.0f) || !std::isfinite(in.weight))
      return make_error(errc::not_finite, "contribution weight " + std::to_string(in.weight));
    total += in.weight;
  }
  out.assign(n, 0.0f);
  for (const auto& in : inputs) {
    const float w = in.weight / total;
    for (std::size_t i = 0; i < n; ++i) out[i] += w * in.values[i];
  }
  return {};
}

bool all_finite(const float* values, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(values[i])) return false;
  return true;
}

}  // namespace atl
