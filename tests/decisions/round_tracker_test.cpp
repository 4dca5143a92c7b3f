#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "actors/decisions/round_tracker.hpp"

namespace atl {
namespace {

round_tracker seeded_at_round_zero() {
  round_tracker t(0, {1.0f, 0.0f});
  EXPECT_FALSE(t.seed({1.0f, 2.0f}));
  EXPECT_FALSE(t.committed());
  return t;
}

TEST(RoundTracker, ARoundCompletesWhenEveryParticipantContributed) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a", "w/b"}));
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
  auto first = t.add("w/a", 7, 1, {0.5f, 1.0f}, 1.0f);
  ASSERT_TRUE(first);
  EXPECT_FALSE(*first);
  auto second = t.add("w/b", 7, 1, {1.5f, -1.0f}, 1.0f);
  ASSERT_TRUE(second);
  EXPECT_TRUE(*second);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::committing);
  EXPECT_EQ(t.committed_round(), 1u);
  // lr 1, no momentum: theta - mean(delta) = {1 - 1, 2 - 0}
  EXPECT_FLOAT_EQ(t.theta()[0], 0.0f);
  EXPECT_FLOAT_EQ(t.theta()[1], 2.0f);
  ASSERT_FALSE(t.committed());
  EXPECT_EQ(t.current_phase(), round_tracker::phase::ready);
}

// diloco.weighting = samples: a worker that trained three times the samples counts three
// times: theta - (3 x_a + 1 x_b) / 4.
TEST(RoundTracker, ARoundAveragesByTheContributionsWeights) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a", "w/b"}));
  ASSERT_TRUE(t.add("w/a", 7, 1, {1.0f, 0.0f}, 3.0f));
  auto done = t.add("w/b", 7, 1, {-1.0f, 4.0f}, 1.0f);
  ASSERT_TRUE(done && *done);
  EXPECT_FLOAT_EQ(t.theta()[0], 1.0f - 0.5f);
  EXPECT_FLOAT_EQ(t.theta()[1], 2.0f - 1.0f);
}

// Contributions are fragment-sized: a finished round's buffers are handed out again for
// the next round's contributions instead of being allocated (and faulted in) afresh.
TEST(RoundTracker, AFinishedRoundsContributionBuffersAreReused) {
  auto t = seeded_at_round_zero();
  EXPECT_TRUE(t.contribution_buffer().empty()) << "no round finished yet";
  ASSERT_FALSE(t.open(7, {"w/a", "w/b"}));
  std::vector<float> a = {0.5f, 1.0f}, b = {1.5f, -1.0f};
  const float* memory[] = {a.data(), b.data()};
  ASSERT_TRUE(t.add("w/a", 7, 1, std::move(a), 1.0f));
  ASSERT_TRUE(t.add("w/b", 7, 1, std::move(b), 1.0f));
  EXPECT_TRUE(t.contribution_buffer().empty()) << "still the committing round's";
  ASSERT_FALSE(t.committed());
  const auto first = t.contribution_buffer(), second = t.contribution_buffer();
  EXPECT_EQ(first.size(), 2u);
  EXPECT_TRUE((first.data() == memory[0] && second.data() == memory[1]) ||
              (first.data() == memory[1] && second.data() == memory[0]));
  EXPECT_TRUE(t.contribution_buffer().empty()) << "two contributions, two buffers";
}

TEST(RoundTracker, AContributionFromAnOlderEpochIsRefused) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a"}));
  auto r = t.add("w/a", 6, 1, {0.0f, 0.0f}, 1.0f);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::stale_epoch);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
}

TEST(RoundTracker, AnOlderEpochIsStaleBetweenRoundsToo) {
  // A replay from a gone epoch meets the fence whether a round is collecting, committing
  // or not yet open: its round number says nothing about it.
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a"}));
  ASSERT_TRUE(t.add("w/a", 7, 1, {0.0f, 0.0f}, 1.0f));
  EXPECT_EQ(t.current_phase(), round_tracker::phase::committing);
  EXPECT_EQ(t.add("w/x", 0, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::stale_epoch);
  ASSERT_FALSE(t.committed());
  EXPECT_EQ(t.current_phase(), round_tracker::phase::ready);
  EXPECT_EQ(t.add("w/x", 0, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::stale_epoch);
  EXPECT_EQ(t.add("w/x", 7, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);  // same epoch: closed
}

TEST(RoundTracker, AContributionForAnotherRoundIsRefused) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a"}));
  EXPECT_EQ(t.add("w/a", 7, 2, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);
  EXPECT_EQ(t.add("w/a", 7, 0, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);
}

TEST(RoundTracker, AContributionToAClosedRoundIsRefused) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(7, {"w/a"}));
  ASSERT_TRUE(t.add("w/a", 7, 1, {0.0f, 0.0f}, 1.0f));
  // While round 1 commits, a resend from its contributor is a duplicate (its result is
  // coming); anyone else is told the round is closed.
  EXPECT_EQ(t.add("w/a", 7, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::duplicate);
  EXPECT_EQ(t.add("w/b", 7, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);
  ASSERT_FALSE(t.committed());
  EXPECT_EQ(t.add("w/a", 7, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);
}

TEST(RoundTracker, AtItsDeadlineARoundClosesWithEnoughContributionsOnly) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(1, {"w/a", "w/b", "w/c"}));
  ASSERT_TRUE(t.add("w/a", 1, 1, {2.0f, 2.0f}, 1.0f));
  auto early = t.close_at_deadline(2);  // one of the two needed
  ASSERT_TRUE(early);
  EXPECT_FALSE(*early);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
  ASSERT_TRUE(t.add("w/b", 1, 1, {0.0f, 0.0f}, 1.0f));
  auto closed = t.close_at_deadline(2);
  ASSERT_TRUE(closed && *closed);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::committing);
  EXPECT_EQ(t.participants(), (std::set<std::string>{"w/a", "w/b"}));  // w/c was dropped
  EXPECT_EQ(t.add("w/c", 1, 1, {0.0f, 0.0f}, 1.0f).err().code, errc::wrong_round);
}

// Late work: w/c was left out of round 1 (closed at its deadline); its contribution to
// round 1, sent while round 2 collects, is folded into round 2 at half its weight, as an
// input of its own: round 2 still waits for w/c's own contribution.
round_tracker round_two_without_c_in_round_one() {
  auto t = seeded_at_round_zero();
  EXPECT_FALSE(t.open(1, {"w/a", "w/b", "w/c"}));
  EXPECT_TRUE(t.add("w/a", 1, 1, {0.0f, 0.0f}, 1.0f));
  EXPECT_TRUE(t.add("w/b", 1, 1, {0.0f, 0.0f}, 1.0f));
  EXPECT_TRUE(t.close_at_deadline(2));
  EXPECT_FALSE(t.committed());  // theta stays {1, 2}: both averaged zeros
  EXPECT_FALSE(t.open(2, {"w/a", "w/b", "w/c"}));
  return t;
}

TEST(RoundTracker, LateWorkIsFoldedIntoTheNextRoundAtHalfItsWeight) {
  auto t = round_two_without_c_in_round_one();
  auto late = t.add_late("w/c", 1, 1, {4.0f, 0.0f}, 2.0f);
  ASSERT_TRUE(late);
  EXPECT_FALSE(*late) << "the late input completed the round it is not a participant's contribution to";
  EXPECT_FALSE(t.has_contributed("w/c"));
  EXPECT_EQ(t.contributors(), (std::vector<std::string>{}));
  ASSERT_TRUE(t.add("w/a", 2, 2, {1.0f, 0.0f}, 1.0f));
  ASSERT_TRUE(t.add("w/b", 2, 2, {1.0f, 0.0f}, 1.0f));
  auto done = t.add("w/c", 2, 2, {1.0f, 0.0f}, 1.0f);
  ASSERT_TRUE(done && *done);
  // weights 1, 1, 1 and the late 2 x 0.5 = 1: theta - (1 + 1 + 1 + 4) / 4 in the first value.
  EXPECT_FLOAT_EQ(t.theta()[0], 1.0f - 7.0f / 4.0f);
  EXPECT_FLOAT_EQ(t.theta()[1], 2.0f);
  EXPECT_EQ(t.contributors(), (std::vector<std::string>{"w/a", "w/b", "w/c"}));
  const std::vector<std::pair<std::string, float>> inputs = {
      {"w/a", 1.0f}, {"w/b", 1.0f}, {"w/c", 1.0f}, {"w/c#late", 1.0f}};
  EXPECT_EQ(t.inputs(), inputs) << "the round log's inputs, in the order averaged";
}

// The late input of the last participant still missing is not its contribution: the round
// waits for that participant's own.
TEST(RoundTracker, ALateInputNeverCompletesARound) {
  auto t = round_two_without_c_in_round_one();
  ASSERT_TRUE(t.add("w/a", 2, 2, {1.0f, 0.0f}, 1.0f));
  ASSERT_TRUE(t.add("w/b", 2, 2, {1.0f, 0.0f}, 1.0f));
  auto late = t.add_late("w/c", 1, 1, {4.0f, 0.0f}, 2.0f);
  ASSERT_TRUE(late);
  EXPECT_FALSE(*late);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
  // Refused late work leaves the count as it was.
  auto other = round_two_without_c_in_round_one();
  ASSERT_TRUE(other.add("w/a", 2, 2, {1.0f, 0.0f}, 1.0f));
  ASSERT_TRUE(other.add("w/b", 2, 2, {1.0f, 0.0f}, 1.0f));
  EXPECT_FALSE(other.add_late("w/c", 1, 1, {NAN, 0.0f}, 2.0f));
  auto done = other.add("w/c", 2, 2, {1.0f, 0.0f}, 1.0f);
  ASSERT_TRUE(done && *done);
}

TEST(RoundTracker, LateWorkIsFenced) {
  struct row {
    const char* name;
    std::string worker;
    std::uint64_t epoch, round;
    errc expected;
  };
  const std::vector<row> rows = {
      {"it contributed to the round it names", "w/a", 1, 1, errc::wrong_round},
      {"two rounds late", "w/c", 1, 0, errc::wrong_round},
      {"the open round is not late", "w/c", 2, 2, errc::wrong_round},
      {"from a later epoch than the open round's", "w/c", 3, 1, errc::stale_epoch},
      {"from a stranger", "w/z", 1, 1, errc::not_participant},
  };
  for (const auto& r : rows) {
    auto t = round_two_without_c_in_round_one();
    auto got = t.add_late(r.worker, r.epoch, r.round, {1.0f, 1.0f}, 1.0f);
    ASSERT_FALSE(got) << r.name;
    EXPECT_EQ(got.err().code, r.expected) << r.name;
  }
  auto t = round_two_without_c_in_round_one();
  ASSERT_TRUE(t.add_late("w/c", 1, 1, {1.0f, 1.0f}, 1.0f));
  EXPECT_EQ(t.add_late("w/c", 1, 1, {1.0f, 1.0f}, 1.0f).err().code, errc::duplicate);
  EXPECT_EQ(t.add_late("w/b", 1, 1, {NAN, 1.0f}, 1.0f).err().code, errc::wrong_round);  // w/b was in round 1
}

// A tracker restored from a keeper does not know who was left out of its last round: a
// resend of a counted contribution would be counted twice, so it takes no late work.
TEST(RoundTracker, ARestoredTrackerTakesNoLateWorkForItsFirstRound) {
  round_tracker t(0, {1.0f, 0.0f});
  ASSERT_FALSE(t.restore(4, {1.0f, 2.0f}, {0.0f, 0.0f}));
  ASSERT_FALSE(t.open(9, {"w/a", "w/b"}));
  EXPECT_EQ(t.add_late("w/a", 9, 4, {1.0f, 1.0f}, 1.0f).err().code, errc::wrong_round);
}

TEST(RoundTracker, DuplicatesAndStrangersAreRefusedAndDoNotCount) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(1, {"w/a", "w/b"}));
  ASSERT_TRUE(t.add("w/a", 1, 1, {0.0f, 0.0f}, 1.0f));
  EXPECT_EQ(t.add("w/a", 1, 1, {9.0f, 9.0f}, 1.0f).err().code, errc::duplicate);
  EXPECT_EQ(t.add("w/z", 1, 1, {9.0f, 9.0f}, 1.0f).err().code, errc::not_participant);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
}

TEST(RoundTracker, ANonFiniteOrMisSizedContributionDoesNotPoisonTheRound) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(1, {"w/a", "w/b"}));
  EXPECT_EQ(t.add("w/a", 1, 1, {NAN, 0.0f}, 1.0f).err().code, errc::not_finite);
  EXPECT_EQ(t.add("w/a", 1, 1, {0.0f}, 1.0f).err().code, errc::tensor_mismatch);
  for (const float weight : {0.0f, -1.0f, NAN, INFINITY})  // the round's average could not take it
    EXPECT_EQ(t.add("w/a", 1, 1, {0.0f, 0.0f}, weight).err().code, errc::not_finite) << weight;
  ASSERT_TRUE(t.add("w/a", 1, 1, {0.0f, 0.0f}, 1.0f));
  auto done = t.add("w/b", 1, 1, {0.0f, 0.0f}, 1.0f);
  ASSERT_TRUE(done && *done);
  EXPECT_FLOAT_EQ(t.theta()[0], 1.0f);
}

// int8 and fp4 contributions stay encoded until the outer step decodes them block by
// block: the round reaches the very bits of the same contributions decoded and added, with
// fp32 and encoded contributions mixed in one round.
TEST(RoundTracker, AnEncodedContributionReachesTheBitsOfItsDecodedValues) {
  const std::size_t n = 40'000;
  std::vector<float> theta(n);
  for (std::size_t i = 0; i < n; ++i) theta[i] = std::sin(static_cast<float>(i));
  round_tracker encoded(0, {0.7f, 0.9f}), decoded(0, {0.7f, 0.9f});
  for (auto* t : {&encoded, &decoded}) {
    t->encode_results(codec_kind::int8, 256);
    ASSERT_FALSE(t->seed(theta));
    ASSERT_FALSE(t->committed());
  }
  for (std::uint64_t round = 1; round <= 3; ++round) {
    std::vector<float> a(n), b(n), c(n);
    for (std::size_t i = 0; i < n; ++i) {
      a[i] = 0.01f * std::cos(static_cast<float>(i * round));
      b[i] = 0.02f * std::sin(static_cast<float>(i + round));
      c[i] = 0.005f * static_cast<float>(i % 7);
    }
    encoded_values ea, eb;
    ASSERT_FALSE(encode(codec_kind::int8, a.data(), n, 256, ea));
    ASSERT_FALSE(encode(codec_kind::fp4, b.data(), n, 64, eb));
    std::vector<float> da(n), db(n);
    ASSERT_FALSE(decode(ea, da.data()));
    ASSERT_FALSE(decode(eb, db.data()));
    for (auto* t : {&encoded, &decoded}) ASSERT_FALSE(t->open(round, {"w/a", "w/b", "w/c"}));
    ASSERT_TRUE(encoded.add_encoded("w/a", round, round, ea, 1.0f));
    ASSERT_TRUE(encoded.add_encoded("w/b", round, round, eb, 2.0f));
    ASSERT_TRUE(encoded.add("w/c", round, round, c, 1.0f));
    ASSERT_TRUE(decoded.add("w/a", round, round, da, 1.0f));
    ASSERT_TRUE(decoded.add("w/b", round, round, db, 2.0f));
    ASSERT_TRUE(decoded.add("w/c", round, round, c, 1.0f));
    ASSERT_EQ(encoded.current_phase(), round_tracker::phase::committing);
    EXPECT_EQ(encoded.theta(), decoded.theta()) << "round " << round;
    EXPECT_EQ(encoded.momentum(), decoded.momentum());
    EXPECT_EQ(encoded.residual(), decoded.residual());
    EXPECT_EQ(encoded.last_average(), decoded.last_average());
    ASSERT_TRUE(encoded.released_update() && decoded.released_update());
    EXPECT_EQ(encoded.released_update()->payload, decoded.released_update()->payload);
    for (auto* t : {&encoded, &decoded}) ASSERT_FALSE(t->committed());
  }
  EXPECT_FALSE(encoded.encoded_buffer().payload.empty()) << "an encoded contribution's memory is reused";
}

TEST(RoundTracker, AnEncodedContributionIsFencedAndCheckedLikeADecodedOne) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(1, {"w/a", "w/b"}));
  const std::vector<float> v = {0.5f, -0.25f};
  encoded_values good, bad_scale, short_one, fp32_nan;
  ASSERT_FALSE(encode(codec_kind::int8, v.data(), 2, 256, good));
  bad_scale = good;
  bad_scale.scales[0] = INFINITY;
  ASSERT_FALSE(encode(codec_kind::int8, v.data(), 1, 256, short_one));
  const std::vector<float> nan = {NAN, 0.0f};
  fp32_nan.kind = codec_kind::fp32;
  fp32_nan.count = 2;
  fp32_nan.payload.resize(8);
  std::memcpy(fp32_nan.payload.data(), nan.data(), 8);
  EXPECT_EQ(t.add_encoded("w/a", 1, 1, bad_scale, 1.0f).err().code, errc::not_finite);
  EXPECT_EQ(t.add_encoded("w/a", 1, 1, short_one, 1.0f).err().code, errc::tensor_mismatch);
  EXPECT_EQ(t.add_encoded("w/a", 1, 1, fp32_nan, 1.0f).err().code, errc::not_finite);
  EXPECT_EQ(t.add_encoded("w/a", 0, 1, good, 1.0f).err().code, errc::stale_epoch);
  EXPECT_EQ(t.add_encoded("w/z", 1, 1, good, 1.0f).err().code, errc::not_participant);
  ASSERT_TRUE(t.add_encoded("w/a", 1, 1, good, 1.0f));
  EXPECT_EQ(t.add_encoded("w/a", 1, 1, good, 1.0f).err().code, errc::duplicate);
  EXPECT_EQ(t.current_phase(), round_tracker::phase::collecting);
}

TEST(RoundTracker, ARoundGoesOnWithoutAParticipantThatLeft) {
  auto t = seeded_at_round_zero();
  ASSERT_FALSE(t.open(1, {"w/a", "w/b"}));
  ASSERT_TRUE(t.add("w/a", 1, 1, {0.5f, 0.5f}, 1.0f));
  auto done = t.drop("w/b");
  ASSERT_TRUE(done && *done);
  EXPECT_FLOAT_EQ(t.theta()[0], 0.5f);  // only w/a's delta, renormalised
}

TEST(RoundTracker, TransitionsOutOfOrderAreRefused) {
  round_tracker t(0, {});
  EXPECT_EQ(t.open(1, {"w/a"}).code, errc::unexpected_message);
  EXPECT_EQ(t.committed().code, errc::unexpected_message);
  ASSERT_FALSE(t.seed({1.0f}));
  EXPECT_EQ(t.seed({1.0f}).code, errc::unexpected_message);
  EXPECT_EQ(t.open(1, {"w/a"}).code, errc::unexpected_message);  // still committing round 0
  EXPECT_EQ(t.seed({NAN}).code, errc::unexpected_message);
  round_tracker fresh(0, {});
  EXPECT_EQ(fresh.seed({NAN}).code, errc::not_finite);
}

}  // namespace
}  // namespace atl
