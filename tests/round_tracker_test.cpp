#include <cmath>

#include <gtest/gtest.h>

#include "actors/round_tracker.hpp"

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
  ASSERT_TRUE(t.add("w/a", 1, 1, {0.0f, 0.0f}, 1.0f));
  auto done = t.add("w/b", 1, 1, {0.0f, 0.0f}, 1.0f);
  ASSERT_TRUE(done && *done);
  EXPECT_FLOAT_EQ(t.theta()[0], 1.0f);
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
