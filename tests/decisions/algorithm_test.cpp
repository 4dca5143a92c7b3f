#include <cmath>
#include <limits>

#include <gtest/gtest.h>

#include "runtime/algorithm/fragment_schedule.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/algorithm/overlap_merge.hpp"

namespace atl {
namespace {

TEST(OuterOptimizer, NesterovStepMatchesHandComputedValues) {
  // lr 0.7, momentum 0.9; theta 1, buffer 0, grad 0.5:
  //   buf = 0.9 * 0 + 0.5 = 0.5; theta = 1 - 0.7 * (0.5 + 0.9 * 0.5) = 0.335
  // second step, grad -0.25:
  //   buf = 0.9 * 0.5 - 0.25 = 0.2; theta = 0.335 - 0.7 * (-0.25 + 0.9 * 0.2) = 0.384
  float theta = 1.0f, buf = 0.0f;
  const float g1 = 0.5f, g2 = -0.25f;
  nesterov_step({0.7f, 0.9f}, &theta, &buf, &g1, 1);
  EXPECT_NEAR(buf, 0.5f, 1e-7);
  EXPECT_NEAR(theta, 0.335f, 1e-6);
  nesterov_step({0.7f, 0.9f}, &theta, &buf, &g2, 1);
  EXPECT_NEAR(buf, 0.2f, 1e-7);
  EXPECT_NEAR(theta, 0.384f, 1e-6);
}

TEST(OuterOptimizer, LrOneAndNoMomentumAppliesTheAverageDelta) {
  // theta_global - mean(theta_global - theta_local) = mean(theta_local): parameter averaging.
  std::vector<float> theta = {1.0f, 2.0f}, buf = {0.0f, 0.0f}, grad = {0.25f, -1.0f};
  nesterov_step({1.0f, 0.0f}, theta.data(), buf.data(), grad.data(), 2);
  EXPECT_FLOAT_EQ(theta[0], 0.75f);
  EXPECT_FLOAT_EQ(theta[1], 3.0f);
}

// The merge that carries the steps trained since the contribution (diloco.carry_overlap):
// local = alpha * local + (1 - alpha) * (global + local - at_contribution).
TEST(OverlapMerge, CarriesTheStepsSinceTheContributionIntoTheMerge) {
  struct row {
    const char* name;
    float alpha, global, local, at_contribution, expected;
  };
  const row rows[] = {
      {"alpha 0: the new global plus the tau steps' change", 0.0f, 2.0f, 1.5f, 1.0f, 2.5f},
      {"alpha 0, nothing trained since: the new global", 0.0f, 2.0f, 1.0f, 1.0f, 2.0f},
      {"alpha 0.5: half of each, the steps carried on the global half", 0.5f, 2.0f, 1.5f, 1.0f, 2.0f},
      {"alpha 1: the local values, nothing added", 1.0f, 2.0f, 1.5f, 1.0f, 1.5f},
  };
  for (const auto& r : rows) {
    float merged = r.alpha * r.local + (1.0f - r.alpha) * r.global;  // what merge_global leaves
    carry_since_contribution(&merged, &r.local, &r.at_contribution, r.alpha, 1);
    EXPECT_FLOAT_EQ(merged, r.expected) << r.name;
  }
}

TEST(OuterOptimizer, WeightedAverageUsesTheWeights) {
  std::vector<float> a = {1.0f, 2.0f}, b = {3.0f, 6.0f}, out;
  ASSERT_FALSE(weighted_average({{a.data(), 1.0f}, {b.data(), 3.0f}}, 2, out));
  EXPECT_FLOAT_EQ(out[0], 2.5f);
  EXPECT_FLOAT_EQ(out[1], 5.0f);
  EXPECT_EQ(weighted_average({}, 2, out).code, errc::not_ready);
  EXPECT_EQ(weighted_average({{a.data(), 0.0f}}, 2, out).code, errc::not_finite);
}

TEST(OuterOptimizer, NonFiniteValuesAreDetected) {
  std::vector<float> v = {1.0f, 2.0f};
  EXPECT_TRUE(all_finite(v.data(), 2));
  v[1] = std::nanf("");
  EXPECT_FALSE(all_finite(v.data(), 2));
  v[1] = INFINITY;
  EXPECT_FALSE(all_finite(v.data(), 2));

  // all_finite tests blocks of values at once: one bad value anywhere is found, in the
  // first block, at a block's edge and in a partial last block, and values only past `n`
  // are not read as part of it. The largest finite values and subnormals are finite.
  std::vector<float> many(1000, 1.0f);
  many[3] = std::numeric_limits<float>::max();
  many[4] = -std::numeric_limits<float>::max();
  many[5] = std::numeric_limits<float>::denorm_min();
  EXPECT_TRUE(all_finite(many.data(), many.size()));
  for (std::size_t at : {std::size_t{0}, std::size_t{255}, std::size_t{256}, std::size_t{700}, std::size_t{999}}) {
    for (float bad : {std::nanf(""), -INFINITY}) {
      SCOPED_TRACE(at);
      auto w = many;
      w[at] = bad;
      EXPECT_FALSE(all_finite(w.data(), w.size()));
      EXPECT_TRUE(all_finite(w.data(), at)) << "only values before it";
    }
  }
}

TEST(FragmentSchedule, EveryFragmentSyncsOncePerHSteps) {
  for (std::int64_t h : {1, 4, 10, 50})
    for (std::int64_t p = 1; p <= std::min<std::int64_t>(h, 4); ++p) {
      fragment_schedule s(h, p);
      for (std::int64_t f = 0; f < p; ++f) {
        int syncs = 0;
        for (std::int64_t t = 1; t <= 10 * h; ++t) syncs += s.syncs_at(f, t);
        EXPECT_GE(syncs, 9) << "H=" << h << " P=" << p << " f=" << f;
        EXPECT_LE(syncs, 10);
      }
      for (std::int64_t a = 0; a < p; ++a)
        for (std::int64_t b = a + 1; b < p; ++b) EXPECT_NE(s.offset(a), s.offset(b)) << "H=" << h << " P=" << p;
    }
}

TEST(FragmentSchedule, OneFragmentSyncsAtMultiplesOfH) {
  fragment_schedule s(10, 1);
  EXPECT_FALSE(s.syncs_at(0, 0));
  EXPECT_FALSE(s.syncs_at(0, 5));
  EXPECT_TRUE(s.syncs_at(0, 10));
  EXPECT_EQ(s.round_at(0, 10), 1u);
  EXPECT_EQ(s.round_at(0, 30), 3u);
}

// step_of is the inverse of round_at at every sync step, for staggered fragments too.
TEST(FragmentSchedule, StepOfIsTheSyncStepOfARound) {
  for (std::int64_t p : {1, 2, 3, 4}) {
    fragment_schedule s(5, p);
    for (std::int64_t f = 0; f < p; ++f)
      for (std::int64_t t = 1; t < 60; ++t) {
        if (s.syncs_at(f, t)) {
          EXPECT_EQ(s.step_of(f, s.round_at(f, t)), t) << "P=" << p << " f=" << f << " t=" << t;
        }
      }
  }
  EXPECT_LE(fragment_schedule(5, 2).step_of(1, 0), 0);  // round 0 is no sync
}

// last_round_by(step): the round of the last sync at or before `step` (0 before the first),
// checked against walking the steps one by one, with and without shards.
TEST(FragmentSchedule, TheLastRoundByAStepIsTheRoundOfTheLastSyncAtOrBeforeIt) {
  for (std::int64_t p : {1, 2, 3}) {
    for (std::int64_t shards : {1, 2}) {
      fragment_schedule s(5, p, shards);
      for (std::int64_t u = 0; u < p * shards; ++u) {
        std::uint64_t walked = 0;
        for (std::int64_t t = 0; t < 60; ++t) {
          if (s.syncs_at(u, t)) walked = s.round_at(u, t);
          EXPECT_EQ(s.last_round_by(u, t), walked) << "P=" << p << " S=" << shards << " u=" << u << " t=" << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace atl
