#pragma once
// One outer round applied to a fragment's state: the step that a coordinator takes when a
// round completes and that every keeper takes again from the round's logged inputs
// (storage/round_record.hpp). It is one function so that the two cannot drift: a keeper
// checks the theta_global it reaches against the digest the coordinator logged.
//
//   average  = sum_i w_i x_i / sum_i w_i        (weighted_average; the caller's order)
//   momentum, theta = Nesterov step on average  (nesterov_step)
//   low-bit results: change = theta - previous + residual, sent = decode(encode(change)),
//                    theta = previous + sent, residual = change - sent
//   and, when the state follows the result (state_follows_result, the default since
//   issue 70): momentum = momentum_after_change(previous momentum, sent)
//
// Following the result, a round's published bytes are all a keeper needs to replay it
// (apply_published_change): theta and momentum are functions of what was sent, and the
// residual is the coordinator's own working state, not durable (a coordinator that resumes
// from a keeper starts it at zero: at most one quantization step of one round is lost).
// Otherwise the residual is part of the state: a keeper replays the round from its inputs
// and needs it as much as theta and momentum, and a coordinator that resumes from a keeper
// takes it over so that its next encoded change is the keeper's.
#include <cstddef>
#include <optional>
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

// How a round turns its average into the next theta_global: the run's outer optimizer and
// the codec its results are published in (fp32: theta itself, no residual).
struct outer_rule {
  outer_options outer;
  codec_kind result_codec = codec_kind::fp32;
  std::size_t result_chunk = 0;
  // Low-bit results only: the momentum is updated from the published change (above).
  bool state_follows_result = false;
};

// theta_global, the outer momentum and the result codec's residual (empty: zeros).
struct outer_state {
  std::vector<float> theta, momentum, residual;
};

// Fragment-sized working memory, kept by the caller from one round to the next (a fresh
// 64 MiB vector costs a page fault per 4 KiB, about 0.3 s of system time on these VMs):
// the last round's average, which a record logs when it is fewer bytes than the inputs.
struct outer_scratch {
  std::vector<float> average;
};

// Applies one round whose averaged pseudo-gradient is `average` (state.theta.size()
// values). `published` receives the encoded change that participants add to the previous
// theta, or is reset when theta itself is published: fp32 results; a result chunk the
// codec refuses (theta exact, the residual spent); or a change that is not finite
// somewhere (the step overflowed): then each block (below) where it is not finite keeps
// its exact theta and spends its residual, and the other blocks are as encoded.
//
// The step runs block by block (a few result chunks: average, Nesterov, encode, decode,
// residual while the block is in cache) and, for large fragments, on every core; each
// value depends on its own index only, so the bits are the same whatever the split.
// Values in one block of the step below: whole result chunks, about 16 Ki values.
std::size_t outer_block_values(const outer_rule& rule);

void apply_outer_average(const outer_rule& rule, const float* average, outer_state& state, outer_scratch& scratch,
                         std::optional<encoded_values>& published);

// weighted_average of `inputs` into scratch.average (the same additions, so the same bits),
// then apply_outer_average, fused. Typed errors of weighted_average (no inputs, a weight
// that is not positive and finite) change nothing.
status apply_outer_round(const outer_rule& rule, const std::vector<weighted_input>& inputs, outer_state& state,
                         outer_scratch& scratch, std::optional<encoded_values>& published);

// A round replayed from its published change alone (a rule that follows the result):
// theta += decode(change), the very addition each participant makes, and the momentum from
// it (momentum_after_change); the residual is left as it is. Typed errors: tensor_mismatch
// (a change of another size or codec than the rule's), check_encoded's; on error nothing changed.
status apply_published_change(const outer_rule& rule, const encoded_values& change, outer_state& state);

}  // namespace atl
