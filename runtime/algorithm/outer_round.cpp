#include "runtime/algorithm/outer_round.hpp"

namespace atl {
namespace {

// state.theta holds the exact step from `previous`; it becomes previous + decode(encode(change)).
void publish_encoded(const outer_rule& rule, const std::vector<float>& previous, outer_state& state,
                     outer_scratch& scratch, std::optional<encoded_values>& published) {
  auto& theta = state.theta;
  auto& residual = state.residual;
  const std::size_t n = theta.size();
  if (residual.size() != n) residual.assign(n, 0.0f);
  auto& change = scratch.change;
  auto& decoded = scratch.decoded;
  change.resize(n);
  decoded.resize(n);
  for (std::size_t i = 0; i < n; ++i) change[i] = theta[i] - previous[i] + residual[i];
  encoded_values enc;
  if (encode(rule.result_codec, change.data(), n, rule.result_chunk, enc) || decode(enc, decoded.data())) {
    published.reset();  // theta itself is released: exact, and the residual is spent
    residual.assign(n, 0.0f);
    return;
  }
  for (std::size_t i = 0; i < n; ++i) {
    theta[i] = previous[i] + decoded[i];  // the very addition each participant makes
    residual[i] = change[i] - decoded[i];
  }
  published = std::move(enc);
}

}  // namespace

void apply_outer_average(const outer_rule& rule, const float* average, outer_state& state, outer_scratch& scratch,
                         std::optional<encoded_values>& published) {
  const bool encoded = rule.result_codec != codec_kind::fp32;
  if (encoded) scratch.previous = state.theta;
  if (state.momentum.size() != state.theta.size()) state.momentum.assign(state.theta.size(), 0.0f);
  nesterov_step(rule.outer, state.theta.data(), state.momentum.data(), average, state.theta.size());
  if (encoded) publish_encoded(rule, scratch.previous, state, scratch, published);
  else published.reset();
}

status apply_outer_round(const outer_rule& rule, const std::vector<weighted_input>& inputs, outer_state& state,
                         outer_scratch& scratch, std::optional<encoded_values>& published) {
  if (auto err = weighted_average(inputs, state.theta.size(), scratch.average)) return err;
  apply_outer_average(rule, scratch.average.data(), state, scratch, published);
  return {};
}

}  // namespace atl
