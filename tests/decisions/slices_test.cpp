// Slices of a fragment (runtime/algorithm/slices.hpp): the plan, the cut of an encoded
// tensor, and the claim sharded rounds rest on: a round reduced in slices reaches the bits
// of the same round reduced whole.
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/algorithm/slices.hpp"
#include "tests/support/random_values.hpp"

namespace atl {
namespace {

struct plan_row {
  const char* name;
  std::size_t values, granule, shards;
  std::vector<fragment_slice> expected;
};

TEST(Slices, APlanCoversTheFragmentInSlicesOfWholeGranulesWithinOneGranuleOfEachOther) {
  constexpr std::size_t g = 16384;
  const plan_row rows[] = {
      {"an empty fragment is one empty slice", 0, g, 4, {{0, 0}}},
      {"a fragment under one granule is one slice", 10, g, 4, {{0, 10}}},
      {"four granules in four", 4 * g, g, 4, {{0, g}, {g, g}, {2 * g, g}, {3 * g, g}}},
      {"the first slices take the extra granule, the last ends the fragment",
       5 * g + 7,
       g,
       2,
       {{0, 3 * g}, {3 * g, 2 * g + 7}}},
      {"no more slices than granules", 3 * g, g, 8, {{0, g}, {g, g}, {2 * g, g}}},
      {"no shards asked is one slice", 2 * g, g, 0, {{0, 2 * g}}},
      {"one shard is the whole fragment (today's star)", 7 * g + 1, g, 1, {{0, 7 * g + 1}}},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    EXPECT_EQ(plan_slices(row.values, row.granule, row.shards), row.expected);
  }
}

TEST(Slices, AutoIsASliceAWorkerUpToEightWhileTheSmallestFragmentHasGranulesForEach) {
  constexpr std::size_t g = 16384;
  struct row {
    const char* name;
    std::vector<std::size_t> fragments;
    std::size_t members, max_units, expected;
  };
  const row rows[] = {
      {"a slice a worker", {100 * g}, 4, 4096, 4},
      {"two workers, two slices", {100 * g, 100 * g}, 2, 4096, 2},
      {"eight at most, however many workers", {100 * g}, 20, 4096, max_auto_shards},
      {"the smallest fragment's granules bound it", {100 * g, 3 * g}, 8, 4096, 3},
      {"a partial granule is a slice (plan_slices gives it one)", {2 * g + 1}, 8, 4096, 3},
      {"a fragment under one granule: the star", {g - 1, 100 * g}, 8, 4096, 1},
      {"an empty fragment: the star", {0}, 8, 4096, 1},
      {"one worker: the star", {100 * g}, 1, 4096, 1},
      {"no workers asked: still one slice", {100 * g}, 0, 4096, 1},
      {"the coordinators' limit shared by the fragments", {100 * g, 100 * g, 100 * g}, 8, 12, 4},
      {"no fragments known: workers and the cap decide", {}, 5, 4096, 5},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    const auto shards = auto_shards(r.fragments, g, r.members, r.max_units);
    EXPECT_EQ(shards, r.expected);
    // What auto chooses, every fragment can be cut in (the worker refuses a run otherwise).
    for (const auto values : r.fragments) {
      if (shards > 1) {
        EXPECT_EQ(plan_slices(values, g, shards).size(), shards);
      }
    }
  }
}

TEST(Slices, AGranuleIsWholeBlocksOfTheOuterStepAndWholeContributionChunks) {
  struct row {
    const char* name;
    codec_kind result;
    std::size_t result_chunk, contribution_chunk, expected;
  };
  const row rows[] = {
      {"fp32 results, chunks of 256", codec_kind::fp32, 0, 256, 16384},
      {"int8 results and contributions in chunks of 256", codec_kind::int8, 256, 256, 16384},
      {"chunks of 100: a block is 163 chunks", codec_kind::int8, 100, 100, 16300},
      {"a result chunk above a block is the block", codec_kind::int8, 50'000, 256, 800'000},
      {"contributions without chunks", codec_kind::fp32, 0, 0, 16384},
  };
  for (const auto& r : rows) {
    outer_rule rule;
    rule.result_codec = r.result;
    rule.result_chunk = r.result_chunk;
    EXPECT_EQ(slice_granule(rule, r.contribution_chunk), r.expected) << r.name;
  }
}

TEST(Slices, TheCutOfAnEncodedTensorIsWhatEncodingTheSliceAloneWrites) {
  const codec_kind codecs[] = {codec_kind::fp32, codec_kind::bf16,   codec_kind::fp16,   codec_kind::int8,
                               codec_kind::fp4,  codec_kind::topk16, codec_kind::topk32, codec_kind::topk64};
  const std::size_t chunk = 256, n = 10 * chunk + 37;  // the last chunk is partial
  const auto values = testing::random_values(n, 3);
  for (const auto codec : codecs) {
    SCOPED_TRACE(to_string(codec));
    encoded_values whole;
    ASSERT_FALSE(encode(codec, values.data(), n, chunk, whole));
    for (const auto& slice : plan_slices(n, 3 * chunk, 3)) {
      auto cut = cut_encoded(whole, slice);
      ASSERT_TRUE(cut) << cut.err().describe();
      encoded_values alone;
      ASSERT_FALSE(encode(codec, values.data() + slice.first, slice.count, chunk, alone));
      EXPECT_EQ(cut->count, slice.count);
      EXPECT_EQ(cut->chunk, alone.chunk);
      EXPECT_EQ(cut->payload, alone.payload) << "slice at " << slice.first;
      EXPECT_EQ(cut->scales, alone.scales) << "slice at " << slice.first;
    }
  }
}

TEST(Slices, ACutOutsideTheTensorOrOffItsChunksIsRefused) {
  const auto values = testing::random_values(1000, 4);
  encoded_values whole;
  ASSERT_FALSE(encode(codec_kind::int8, values.data(), values.size(), 256, whole));
  struct row {
    const char* name;
    fragment_slice slice;
    errc expected;
  };
  const row rows[] = {
      {"past the end", {768, 256}, errc::invalid_config},
      {"a start inside a chunk", {100, 156}, errc::invalid_config},
      {"an end inside a chunk, not the tensor's", {0, 300}, errc::invalid_config},
      {"an end that wraps around", {256, std::numeric_limits<std::size_t>::max()}, errc::invalid_config},
  };
  for (const auto& r : rows) {
    auto cut = cut_encoded(whole, r.slice);
    ASSERT_FALSE(cut) << r.name;
    EXPECT_EQ(cut.err().code, r.expected) << r.name;
  }
  EXPECT_TRUE(cut_encoded(whole, {768, 232})) << "the last, partial chunk";
  auto short_payload = whole;
  short_payload.payload.pop_back();
  auto cut = cut_encoded(short_payload, {0, 256});
  ASSERT_FALSE(cut);
  EXPECT_EQ(cut.err().code, errc::tensor_mismatch);
}

bool same_bits(const float* a, const float* b, std::size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

std::vector<float> range_of(const std::vector<float>& v, const fragment_slice& s) {
  if (v.empty()) return {};
  return {v.begin() + static_cast<std::ptrdiff_t>(s.first), v.begin() + static_cast<std::ptrdiff_t>(s.first + s.count)};
}

struct round_case {
  const char* name;
  codec_kind contributions, results;
  std::size_t values, shards;
};

// Rounds of `c` run whole and in slices from the same state and contributions: theta,
// momentum and the results' residual agree bit for bit after every round, and each slice
// publishes the cut of what the whole publishes. Round 1 has a member missing (two inputs
// of three), and momentum and residuals carry over.
void expect_slices_match_the_whole(const round_case& c, bool overflow_in_round_2) {
  SCOPED_TRACE(c.name);
  const std::size_t chunk = 256;
  outer_rule rule;
  rule.result_codec = c.results;
  rule.result_chunk = has_scales(c.results) ? chunk : 0;
  const auto slices = plan_slices(c.values, slice_granule(rule, chunk), c.shards);
  ASSERT_EQ(slices.size(), c.shards);
  outer_state whole{testing::random_values(c.values, 1), {}, {}};
  std::vector<outer_state> parts;
  for (const auto& s : slices) parts.push_back({range_of(whole.theta, s), {}, {}});
  outer_scratch whole_scratch, part_scratch;
  for (int round = 0; round < 3; ++round) {
    const std::size_t members = round == 1 ? 2 : 3;
    std::vector<std::vector<float>> deltas;
    std::vector<encoded_values> encoded(members);
    for (std::size_t m = 0; m < members; ++m) {
      deltas.push_back(testing::random_values(c.values, 100 + 10 * round + m, 0.01f));
      if (overflow_in_round_2 && round == 2 && m == 0) {  // theta - lr * average overflows in one block
        whole.theta[slices[1].first + 5] = std::numeric_limits<float>::max();
        parts[1].theta[5] = std::numeric_limits<float>::max();
        deltas[m][slices[1].first + 5] = -std::numeric_limits<float>::max();
      }
      if (c.contributions != codec_kind::fp32) {
        ASSERT_FALSE(encode(c.contributions, deltas[m].data(), c.values, chunk, encoded[m]));
      }
    }
    auto input = [&](std::size_t m, const float* values, const encoded_values* enc) {
      const float weight = 1.0f + static_cast<float>(m);
      return c.contributions == codec_kind::fp32 ? weighted_input{values, weight}
                                                 : weighted_input{nullptr, weight, enc};
    };
    std::vector<weighted_input> whole_inputs;
    for (std::size_t m = 0; m < members; ++m) whole_inputs.push_back(input(m, deltas[m].data(), &encoded[m]));
    std::optional<encoded_values> whole_published;
    ASSERT_FALSE(apply_outer_round(rule, whole_inputs, whole, whole_scratch, whole_published));
    for (std::size_t i = 0; i < slices.size(); ++i) {
      const auto& s = slices[i];
      std::vector<encoded_values> cuts;
      for (std::size_t m = 0; m < members && c.contributions != codec_kind::fp32; ++m) {
        auto cut = cut_encoded(encoded[m], s);
        ASSERT_TRUE(cut);
        cuts.push_back(std::move(*cut));
      }
      std::vector<weighted_input> inputs;
      for (std::size_t m = 0; m < members; ++m)
        inputs.push_back(input(m, deltas[m].data() + s.first, cuts.empty() ? nullptr : &cuts[m]));
      std::optional<encoded_values> published;
      ASSERT_FALSE(apply_outer_round(rule, inputs, parts[i], part_scratch, published));
      EXPECT_TRUE(same_bits(parts[i].theta.data(), whole.theta.data() + s.first, s.count))
          << "round " << round << " slice " << i;
      EXPECT_TRUE(same_bits(parts[i].momentum.data(), whole.momentum.data() + s.first, s.count)) << "round " << round;
      if (!whole.residual.empty()) {
        EXPECT_TRUE(same_bits(parts[i].residual.data(), whole.residual.data() + s.first, s.count)) << "round " << round;
      }
      const bool overflowed = overflow_in_round_2 && round == 2 && i == 1;
      if (whole_published) {
        ASSERT_TRUE(published) << "round " << round << " slice " << i;
        auto cut = cut_encoded(*whole_published, s);
        ASSERT_TRUE(cut);
        EXPECT_EQ(published->payload, cut->payload) << "round " << round << " slice " << i;
        EXPECT_EQ(published->scales, cut->scales) << "round " << round << " slice " << i;
      } else if (c.results != codec_kind::fp32) {
        // The whole released theta itself because one block overflowed: only the slice
        // that holds the block does; the others publish their change as before.
        ASSERT_TRUE(overflow_in_round_2 && round == 2);
        EXPECT_EQ(published.has_value(), !overflowed) << "slice " << i;
      } else {
        EXPECT_FALSE(published) << "fp32 results: theta itself";
      }
    }
  }
}

TEST(Slices, ARoundReducedInSlicesReachesTheBitsOfTheRoundReducedWhole) {
  const round_case cases[] = {
      {"fp32 in, fp32 out", codec_kind::fp32, codec_kind::fp32, 5 * 16384 + 301, 3},
      {"int8 in, int8 out", codec_kind::int8, codec_kind::int8, 5 * 16384 + 301, 3},
      {"fp4 in, fp4 out", codec_kind::fp4, codec_kind::fp4, 6 * 16384 + 38, 4},
      {"topk32 in, topk16 out", codec_kind::topk32, codec_kind::topk16, 4 * 16384 + 129, 2},
      {"topk16 in, fp32 out", codec_kind::topk16, codec_kind::fp32, 3 * 16384, 3},
      // The whole fragment takes the threaded step (4 Mi values and more); its slices do not.
      {"int8, the whole step threaded", codec_kind::int8, codec_kind::int8, (std::size_t{1} << 22) + 777, 4},
  };
  for (const auto& c : cases) expect_slices_match_the_whole(c, false);
}

TEST(Slices, ABlockThatOverflowsReleasesExactThetaInItsSliceAloneAndTheBitsStillAgree) {
  expect_slices_match_the_whole({"int8 in, int8 out", codec_kind::int8, codec_kind::int8, 5 * 16384 + 301, 3}, true);
  expect_slices_match_the_whole({"fp32 in, fp4 out", codec_kind::fp32, codec_kind::fp4, 4 * 16384, 2}, true);
}

}  // namespace
}  // namespace atl
