#include "runtime/algorithm/outer_round.hpp"

#include <algorithm>

#include "runtime/algorithm/parallel_ranges.hpp"

namespace atl {
namespace {

// Where a round's average comes from: given, or the inputs averaged here block by block.
struct average_source {
  const float* given = nullptr;
  const std::vector<weighted_input>* inputs = nullptr;
  std::vector<float> weights;  // the inputs' normalised weights
};

// One thread's block-sized buffers (empty where the round needs none).
struct block_buffers {
  std::vector<float> previous, change, decoded, input, previous_momentum;
  block_buffers(std::size_t publishing, std::size_t decoding, std::size_t following)
      : previous(publishing), change(publishing), decoded(publishing), input(decoding), previous_momentum(following) {}
};

// The block's average: the given one, or weighted_average's sums for these values (zero,
// then each input's w_i * x_i in order: the same additions, so the same bits; an encoded
// input is decoded first, to decode()'s values), kept in scratch.average for the record.
const float* block_average(const average_source& src, std::size_t first, std::size_t n, float* average,
                           block_buffers& buf) {
  if (src.given) return src.given + first;
  float* out = average + first;
  for (std::size_t i = 0; i < n; ++i) out[i] = 0.0f;
  for (std::size_t k = 0; k < src.inputs->size(); ++k) {
    const auto& in = (*src.inputs)[k];
    const float w = src.weights[k];
    const float* x = in.values ? in.values + first : buf.input.data();
    if (in.encoded) decode_range(*in.encoded, first, n, buf.input.data());
    for (std::size_t i = 0; i < n; ++i) out[i] += w * x[i];
  }
  return out;
}

// Publishes block [first, first + n), whose theta holds the exact step from `previous`:
// theta becomes previous + decode(encode(change)) and the residual what that left out. A
// change that is not finite is not encoded: the block keeps its exact theta, its residual
// is spent, and the caller publishes theta itself. Returns whether the block was encoded.
bool publish_block(std::size_t first, std::size_t n, outer_state& state, block_buffers& buf, encoded_values& enc) {
  float* theta = state.theta.data() + first;
  float* residual = state.residual.data() + first;
  const float* previous = buf.previous.data();
  float* change = buf.change.data();
  float* decoded = buf.decoded.data();
  for (std::size_t i = 0; i < n; ++i) change[i] = theta[i] - previous[i] + residual[i];
  if (!all_finite(change, n)) {
    for (std::size_t i = 0; i < n; ++i) residual[i] = 0.0f;
    return false;
  }
  encode_range(change, first, n, enc);
  decode_range(enc, first, n, decoded);
  for (std::size_t i = 0; i < n; ++i) {
    theta[i] = previous[i] + decoded[i];  // the very addition each participant makes
    residual[i] = change[i] - decoded[i];
  }
  return true;
}

// The whole step, block by block and in parallel for large fragments. Every value is
// computed from its own index only, so the bits do not depend on the blocks or threads
// (a coordinator and a keeper with other core counts reach the same digest).
void apply_blocks(const outer_rule& rule, const average_source& src, outer_state& state, outer_scratch& scratch,
                  std::optional<encoded_values>& published) {
  const std::size_t n = state.theta.size();
  if (state.momentum.size() != n) state.momentum.assign(n, 0.0f);
  if (src.inputs) scratch.average.resize(n);
  encoded_values enc;
  bool encoding = rule.result_codec != codec_kind::fp32;
  if (encoding) {
    if (state.residual.size() != n) state.residual.assign(n, 0.0f);
    encoding = !shape_encoded(rule.result_codec, n, rule.result_chunk, enc);  // a bad chunk: theta itself
  }
  // Never more than the fragment: a result chunk larger than it (a hostile record's, say)
  // is one block of the whole fragment, not a chunk-sized buffer per thread.
  const std::size_t block = std::max<std::size_t>(1, std::min(outer_block_values(rule), n));
  const bool decoding =
      src.inputs && std::any_of(src.inputs->begin(), src.inputs->end(), [](const auto& in) { return in.encoded; });
  const bool following = encoding && rule.state_follows_result;
  std::vector<char> failed((n + block - 1) / block, 0);  // per block: its change was not finite
  parallel_ranges(n, block, [&](std::size_t begin, std::size_t end) {
    block_buffers buf(encoding ? block : 0, decoding ? block : 0, following ? block : 0);
    for (std::size_t first = begin; first < end; first += block) {
      const std::size_t m = std::min(block, end - first);
      const float* average = block_average(src, first, m, scratch.average.data(), buf);
      float* theta = state.theta.data() + first;
      float* momentum = state.momentum.data() + first;
      if (encoding) std::copy(theta, theta + m, buf.previous.begin());
      if (following) std::copy(momentum, momentum + m, buf.previous_momentum.begin());
      nesterov_step(rule.outer, theta, momentum, average, m);
      if (encoding && !publish_block(first, m, state, buf, enc)) {
        failed[first / block] = 1;  // theta and momentum exact: the round's full state is committed
      } else if (following) {  // the momentum from what was sent, as a keeper computes it
        std::copy(buf.previous_momentum.begin(), buf.previous_momentum.begin() + m, momentum);
        momentum_after_change(rule.outer, momentum, buf.decoded.data(), m);
      }
    }
  });
  const bool any_failed = std::find(failed.begin(), failed.end(), 1) != failed.end();
  if (encoding && !any_failed) {
    published = std::move(enc);
    return;
  }
  published.reset();  // theta itself is released
  if (rule.result_codec != codec_kind::fp32 && !encoding) state.residual.assign(n, 0.0f);  // spent
}

}  // namespace

// Whole result chunks, about 16 Ki values, so that a block's average, theta, momentum,
// residual and change stay in the core's cache from the average to the residual (one pass
// over memory instead of one per step: the step is memory-bound).
std::size_t outer_block_values(const outer_rule& rule) {
  constexpr std::size_t target = 16384;
  const std::size_t chunk = has_scales(rule.result_codec) ? rule.result_chunk : 0;
  if (chunk == 0) return target;
  return chunk >= target ? chunk : target / chunk * chunk;
}

void apply_outer_average(const outer_rule& rule, const float* average, outer_state& state, outer_scratch& scratch,
                         std::optional<encoded_values>& published) {
  average_source src;
  src.given = average;
  apply_blocks(rule, src, state, scratch, published);
}

status apply_outer_round(const outer_rule& rule, const std::vector<weighted_input>& inputs, outer_state& state,
                         outer_scratch& scratch, std::optional<encoded_values>& published) {
  auto weights = normalised_weights(inputs);
  if (!weights) return weights.err();
  average_source src;
  src.inputs = &inputs;
  src.weights = std::move(*weights);
  apply_blocks(rule, src, state, scratch, published);
  return {};
}

status apply_published_change(const outer_rule& rule, const encoded_values& change, outer_state& state) {
  const std::size_t n = state.theta.size();
  if (change.kind != rule.result_codec || change.count != n ||
      (has_scales(change.kind) && change.chunk != rule.result_chunk))
    return make_error(errc::tensor_mismatch, std::string("a published change in ") + to_string(change.kind) + " of " +
                                                 std::to_string(change.count) + " values for a round in " +
                                                 to_string(rule.result_codec) + " of " + std::to_string(n));
  if (auto err = check_encoded(change)) return err;
  if (state.momentum.size() != n) state.momentum.assign(n, 0.0f);
  // The coordinator's blocks (apply_blocks), so that each value is decoded as it was there.
  const std::size_t block = std::max<std::size_t>(1, std::min(outer_block_values(rule), n));
  parallel_ranges(n, block, [&](std::size_t begin, std::size_t end) {
    std::vector<float> decoded(block);
    for (std::size_t first = begin; first < end; first += block) {
      const std::size_t m = std::min(block, end - first);
      decode_range(change, first, m, decoded.data());
      float* theta = state.theta.data() + first;
      for (std::size_t i = 0; i < m; ++i) theta[i] = theta[i] + decoded[i];
      momentum_after_change(rule.outer, state.momentum.data() + first, decoded.data(), m);
    }
  });
  return {};
}

}  // namespace atl
