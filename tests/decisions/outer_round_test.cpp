// The fused outer step (runtime/algorithm/outer_round.hpp) against the step written out
// array by array: average, Nesterov, encode, decode, residual. The fused step must reach
// the same bits whatever its blocks and threads, or coordinators and keepers built before
// and after it (or on machines with other core counts) would refuse each other's digests.
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/algorithm/outer_round.hpp"
#include "tests/support/random_values.hpp"

namespace atl {
namespace {

// The step as it reads, one whole-array pass after another.
void reference_round(const outer_rule& rule, const std::vector<weighted_input>& inputs, outer_state& state,
                     std::optional<encoded_values>& published) {
  const std::size_t n = state.theta.size();
  std::vector<float> average;
  ASSERT_FALSE(weighted_average(inputs, n, average));
  if (state.momentum.size() != n) state.momentum.assign(n, 0.0f);
  const auto previous = state.theta;
  nesterov_step(rule.outer, state.theta.data(), state.momentum.data(), average.data(), n);
  published.reset();
  if (rule.result_codec == codec_kind::fp32) return;
  if (state.residual.size() != n) state.residual.assign(n, 0.0f);
  std::vector<float> change(n), decoded(n);
  for (std::size_t i = 0; i < n; ++i) change[i] = state.theta[i] - previous[i] + state.residual[i];
  encoded_values enc;
  ASSERT_FALSE(encode(rule.result_codec, change.data(), n, rule.result_chunk, enc));
  ASSERT_FALSE(decode(enc, decoded.data()));
  for (std::size_t i = 0; i < n; ++i) {
    state.theta[i] = previous[i] + decoded[i];
    state.residual[i] = change[i] - decoded[i];
  }
  published = std::move(enc);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct step_case {
  const char* name;
  codec_kind codec;
  std::size_t chunk;
  std::size_t values;
  std::size_t inputs;
};

TEST(OuterRound, TheFusedStepReachesTheBitsOfTheStepWrittenOutArrayByArray) {
  // Sizes below and above the threading threshold (4 Mi values), a count that ends inside
  // a block, and chunks below, at and above a block's 16 Ki values.
  const step_case cases[] = {
      {"fp32 results, small", codec_kind::fp32, 0, 40'001, 3},
      {"int8, chunk 256, threaded", codec_kind::int8, 256, (std::size_t{1} << 22) + 777, 2},
      {"int8, chunk larger than a block", codec_kind::int8, 50'000, 160'003, 4},
      {"fp4, chunk 256, odd count", codec_kind::fp4, 256, 70'001, 2},
      {"fp4, threaded", codec_kind::fp4, 64, (std::size_t{1} << 22) + 3, 3},
      {"bf16 results", codec_kind::bf16, 0, 33'333, 2},
      {"fp32 results, threaded", codec_kind::fp32, 0, (std::size_t{1} << 22) + 5, 2},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    outer_rule rule;
    rule.result_codec = c.codec;
    rule.result_chunk = c.chunk;
    outer_state fused{testing::random_values(c.values, 1), {}, {}};
    outer_state reference = fused;
    outer_scratch scratch;
    for (int round = 0; round < 3; ++round) {  // momentum and residual carried over
      std::vector<std::vector<float>> deltas;
      std::vector<weighted_input> inputs;
      for (std::size_t k = 0; k < c.inputs; ++k)
        deltas.push_back(testing::random_values(c.values, 100 + round * 10 + k, 0.01f));
      for (std::size_t k = 0; k < c.inputs; ++k) inputs.push_back({deltas[k].data(), 1.0f + static_cast<float>(k)});
      std::optional<encoded_values> fused_published, reference_published;
      ASSERT_FALSE(apply_outer_round(rule, inputs, fused, scratch, fused_published));
      reference_round(rule, inputs, reference, reference_published);
      EXPECT_TRUE(same_bits(fused.theta, reference.theta)) << "round " << round;
      EXPECT_TRUE(same_bits(fused.momentum, reference.momentum)) << "round " << round;
      EXPECT_TRUE(same_bits(fused.residual, reference.residual)) << "round " << round;
      ASSERT_EQ(fused_published.has_value(), reference_published.has_value());
      if (fused_published) {
        EXPECT_EQ(fused_published->payload, reference_published->payload);
        EXPECT_EQ(fused_published->scales, reference_published->scales);
      }
      std::vector<float> average;
      ASSERT_FALSE(weighted_average(inputs, c.values, average));
      EXPECT_TRUE(same_bits(scratch.average, average)) << "the logged average";
    }
  }
}

TEST(OuterRound, AKeeperThatReplaysTheLoggedAverageReachesTheSameState) {
  outer_rule rule;
  rule.result_codec = codec_kind::int8;
  rule.result_chunk = 256;
  const std::size_t n = 100'000;
  outer_state coordinator{testing::random_values(n, 7), {}, {}};
  outer_state keeper = coordinator;
  outer_scratch coordinator_scratch, keeper_scratch;
  for (int round = 0; round < 4; ++round) {
    auto a = testing::random_values(n, 20 + round, 0.01f), b = testing::random_values(n, 40 + round, 0.01f);
    std::optional<encoded_values> from_inputs, from_average;
    ASSERT_FALSE(
        apply_outer_round(rule, {{a.data(), 1.0f}, {b.data(), 3.0f}}, coordinator, coordinator_scratch, from_inputs));
    apply_outer_average(rule, coordinator_scratch.average.data(), keeper, keeper_scratch, from_average);
    EXPECT_TRUE(same_bits(coordinator.theta, keeper.theta));
    EXPECT_TRUE(same_bits(coordinator.residual, keeper.residual));
    ASSERT_TRUE(from_inputs && from_average);
    EXPECT_EQ(from_inputs->payload, from_average->payload);
  }
}

TEST(OuterRound, ABlockWhoseChangeOverflowsPublishesThetaItselfAndSpendsOnlyThatBlocksResidual) {
  outer_rule rule;
  rule.outer.lr = 1.0f;
  rule.outer.momentum = 0.0f;
  rule.result_codec = codec_kind::int8;
  rule.result_chunk = 256;
  const std::size_t n = 3 * 16384;  // three blocks
  outer_state state{std::vector<float>(n, 0.0f), {}, std::vector<float>(n, 0.25f)};
  state.theta[16384 + 5] = std::numeric_limits<float>::max();
  std::vector<float> delta(n, 0.5f);
  delta[16384 + 5] = -std::numeric_limits<float>::max();  // theta - lr * delta overflows in block 1
  outer_scratch scratch;
  std::optional<encoded_values> published;
  ASSERT_FALSE(apply_outer_round(rule, {{delta.data(), 1.0f}, {delta.data(), 1.0f}}, state, scratch, published));
  EXPECT_FALSE(published) << "theta itself is released";
  EXPECT_EQ(state.theta[16384 + 5], std::numeric_limits<float>::infinity());
  // The overflowing block keeps its exact step (0 - 0.5) and spends its residual...
  EXPECT_EQ(state.theta[16384], -0.5f);
  EXPECT_EQ(state.residual[16384], 0.0f);
  // ...and blocks 0 and 2 are as encoded: previous + decode(encode(-0.5 + 0.25)).
  for (std::size_t i : {std::size_t{0}, 2 * std::size_t{16384}}) {
    EXPECT_NEAR(state.theta[i], -0.25f, 1e-6f) << i;
    EXPECT_NEAR(state.residual[i], 0.0f, 1e-6f) << i;
  }
}

TEST(OuterRound, ARefusedResultChunkPublishesExactThetaAndSpendsTheResidual) {
  outer_rule rule;
  rule.result_codec = codec_kind::int8;
  rule.result_chunk = 0;  // int8 needs a chunk
  outer_state state{std::vector<float>(1000, 1.0f), {}, std::vector<float>(1000, 0.5f)};
  std::vector<float> delta(1000, 0.1f);
  outer_scratch scratch;
  std::optional<encoded_values> published;
  ASSERT_FALSE(apply_outer_round(rule, {{delta.data(), 1.0f}}, state, scratch, published));
  EXPECT_FALSE(published);
  EXPECT_EQ(state.residual, std::vector<float>(1000, 0.0f));
  EXPECT_FLOAT_EQ(state.theta[0], 1.0f - 0.7f * (0.1f + 0.9f * 0.1f));
}

// Found by fuzz_round_record: a record of a few values whose result chunk is 2^27 made
// every thread allocate chunk-sized block buffers (about 1.5 GB). A block is never more
// than the fragment; with a 2^40 chunk a chunk-sized buffer cannot even be allocated.
TEST(OuterRound, AResultChunkLargerThanTheFragmentIsOneBlockOfTheFragment) {
  outer_rule rule;
  rule.result_codec = codec_kind::int8;
  rule.result_chunk = std::size_t{1} << 40;
  outer_state state{{1.0f, 2.0f, 3.0f}, {}, {}};
  outer_state reference = state;
  outer_scratch scratch;
  const std::vector<float> delta = {0.1f, -0.2f, 0.3f};
  std::optional<encoded_values> published, expected;
  ASSERT_FALSE(apply_outer_round(rule, {{delta.data(), 1.0f}}, state, scratch, published));
  reference_round(rule, {{delta.data(), 1.0f}}, reference, expected);
  EXPECT_TRUE(same_bits(state.theta, reference.theta));
  ASSERT_TRUE(published && expected);
  EXPECT_EQ(published->scales, expected->scales);
}

// weighted_average sums decoded values only: an encoded input is a caller's mistake, refused.
TEST(OuterRound, WeightedAverageRefusesAnInputStillEncoded) {
  const std::vector<float> v = {0.5f, -0.25f};
  encoded_values enc;
  ASSERT_FALSE(encode(codec_kind::int8, v.data(), v.size(), 256, enc));
  std::vector<float> out;
  EXPECT_EQ(weighted_average({{nullptr, 1.0f, &enc}}, v.size(), out).code, errc::invalid_config);
  EXPECT_FALSE(weighted_average({{v.data(), 1.0f}}, v.size(), out));
  EXPECT_EQ(out, v);
}

TEST(OuterRound, NoInputsOrABadWeightIsRefusedAndChangesNothing) {
  outer_rule rule;
  outer_state state{std::vector<float>(10, 1.0f), {}, {}};
  outer_scratch scratch;
  std::optional<encoded_values> published;
  EXPECT_EQ(apply_outer_round(rule, {}, state, scratch, published).code, errc::not_ready);
  std::vector<float> delta(10, 0.1f);
  EXPECT_EQ(apply_outer_round(rule, {{delta.data(), 0.0f}}, state, scratch, published).code, errc::not_finite);
  EXPECT_EQ(state.theta, std::vector<float>(10, 1.0f));
  EXPECT_TRUE(state.momentum.empty());
}

// One SparseLoCo round (diloco.outer = sparseloco) against values worked out by hand. Two
// workers, one chunk of 16 values, topk16 (one value kept a chunk, q * max / 7 with q = 7:
// exact). Each worker accumulates e = beta * held + delta, sends the largest |e| and holds
// the rest; the outer step is theta -= lr * average, with no momentum (Nesterov at 0).
struct sparseloco_row {
  const char* name;
  float beta, lr;
  float held_a3;  // worker a's residual at index 3 before the round (b holds nothing)
  float delta_a3, delta_a5, delta_b3, delta_b9;
  // expected: what each worker sends (index, value), what it then holds at 3, 5, the new theta
  std::size_t sent_a_at;
  float sent_a, held_a3_after, held_a5_after;
  std::size_t sent_b_at;
  float sent_b, held_b3_after;
  float theta3, theta5, theta9;
};

TEST(SparseLoCo, OneRoundMatchesHandComputedValues) {
  const sparseloco_row rows[] = {
      // a: e3 = 0.5 * 4 + 1 = 3 beats |e5| = 2.5, so a sends 3 at 3 and holds -2.5 at 5;
      // b: e9 = 7 beats |e3| = 1: sends 7, holds -1 at 3. Average: 1.5 at 3, 3.5 at 9.
      {"beta 0.5, lr 1", 0.5f, 1.0f, 4.0f, 1.0f, -2.5f, -1.0f, 7.0f, 3, 3.0f, 0.0f, -2.5f, 9, 7.0f, -1.0f, 8.5f, 10.0f,
       6.5f},
      // the same at lr 0.5: half the average
      {"beta 0.5, lr 0.5", 0.5f, 0.5f, 4.0f, 1.0f, -2.5f, -1.0f, 7.0f, 3, 3.0f, 0.0f, -2.5f, 9, 7.0f, -1.0f, 9.25f,
       10.0f, 8.25f},
      // beta 0 forgets the held 4: e3 = 1 loses to |e5| = 2.5; a sends -2.5 at 5 (scale
      // 2.5 / 7, q = -7: exact) and holds 1 at 3. Average: -1.25 at 5, 3.5 at 9.
      {"beta 0 forgets", 0.0f, 1.0f, 4.0f, 1.0f, -2.5f, -1.0f, 7.0f, 5, -2.5f, 1.0f, 0.0f, 9, 7.0f, -1.0f, 10.0f,
       11.25f, 6.5f},
  };
  const std::size_t n = 16;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    error_feedback a, b;
    std::vector<float> delta_a(n, 0.0f), delta_b(n, 0.0f), sent_a(n), sent_b(n);
    encoded_values enc_a, enc_b;
    if (row.held_a3 != 0.0f) {  // a round that leaves a holding held_a3 at 3: send 0, hold it
      std::vector<float> first(n, 0.0f);
      first[3] = row.held_a3;
      first[0] = 2.0f * row.held_a3;  // the chunk's largest, sent
      ASSERT_FALSE(a.encode(codec_kind::topk16, first.data(), n, n, enc_a, row.beta));
      ASSERT_EQ(a.residual()[3], row.held_a3);
      ASSERT_EQ(a.residual()[0], 0.0f);
    }
    delta_a[3] = row.delta_a3;
    delta_a[5] = row.delta_a5;
    delta_b[3] = row.delta_b3;
    delta_b[9] = row.delta_b9;
    ASSERT_FALSE(a.encode(codec_kind::topk16, delta_a.data(), n, n, enc_a, row.beta));
    ASSERT_FALSE(b.encode(codec_kind::topk16, delta_b.data(), n, n, enc_b, row.beta));
    ASSERT_FALSE(decode(enc_a, sent_a.data()));
    ASSERT_FALSE(decode(enc_b, sent_b.data()));
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_EQ(sent_a[i], i == row.sent_a_at ? row.sent_a : 0.0f) << "a sends, i=" << i;
      EXPECT_EQ(sent_b[i], i == row.sent_b_at ? row.sent_b : 0.0f) << "b sends, i=" << i;
    }
    EXPECT_EQ(a.residual()[3], row.held_a3_after);
    EXPECT_EQ(a.residual()[5], row.held_a5_after);
    EXPECT_EQ(b.residual()[3], row.held_b3_after);

    outer_rule rule;
    rule.outer = {row.lr, 0.0f};  // what the coordinators run under sparseloco (outer_momentum_of)
    outer_state state{std::vector<float>(n, 10.0f), {}, {}};
    outer_scratch scratch;
    std::optional<encoded_values> published;
    ASSERT_FALSE(apply_outer_round(rule, {{sent_a.data(), 1.0f}, {sent_b.data(), 1.0f}}, state, scratch, published));
    EXPECT_EQ(state.theta[3], row.theta3);
    EXPECT_EQ(state.theta[5], row.theta5);
    EXPECT_EQ(state.theta[9], row.theta9);
    EXPECT_EQ(state.theta[0], 10.0f);
  }
}

}  // namespace
}  // namespace atl
