// The decisions behind `atoll export` and `atollctl checkpoints`: which stored fragment
// states make a whole model.
#include <gtest/gtest.h>

#include "storage/checkpoint_rounds.hpp"

namespace atl {
namespace {

std::vector<checkpoint_summary> stored(std::initializer_list<std::pair<std::uint32_t, std::uint64_t>> rounds) {
  std::vector<checkpoint_summary> out;
  for (const auto& [f, r] : rounds) out.push_back({f, r, 1, f * 1000 + r, 10});
  return out;
}

TEST(ChooseExport, PicksEachFragmentsRoundOrRefusesWithTheRoundsThatAreWhole) {
  struct row {
    const char* name;
    std::vector<checkpoint_summary> stored;
    std::optional<std::uint64_t> round;
    std::vector<std::uint64_t> want;  // round per fragment
    errc refused;
  };
  const std::vector<row> table = {
      {"latest of each, staggered fragments",
       stored({{0, 4}, {0, 5}, {1, 3}, {1, 4}}),
       std::nullopt,
       {5, 4},
       errc::none},
      {"the given round from every fragment", stored({{0, 4}, {0, 5}, {1, 3}, {1, 4}}), 4, {4, 4}, errc::none},
      {"a round one fragment lacks", stored({{0, 4}, {0, 5}, {1, 3}, {1, 4}}), 5, {}, errc::wrong_round},
      {"a round nobody has", stored({{0, 1}, {1, 1}}), 9, {}, errc::wrong_round},
      {"a fragment with no round yet", stored({{0, 1}}), std::nullopt, {}, errc::not_ready},
      {"nothing stored", {}, std::nullopt, {}, errc::not_ready},
      {"a fragment beyond the run's is ignored", stored({{0, 2}, {1, 2}, {7, 9}}), std::nullopt, {2, 2}, errc::none},
      {"two keepers' lists, the newest round from either",
       stored({{0, 4}, {1, 4}, {0, 4}, {0, 6}, {1, 6}, {1, 4}}),
       std::nullopt,
       {6, 6},
       errc::none},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    auto got = choose_export(r.stored, 2, r.round);
    if (r.refused != errc::none) {
      ASSERT_FALSE(got);
      EXPECT_EQ(got.err().code, r.refused);
      continue;
    }
    ASSERT_TRUE(got) << got.err().describe();
    ASSERT_EQ(got->size(), 2u);
    for (std::uint32_t f = 0; f < 2; ++f) {
      EXPECT_EQ((*got)[f].fragment, f);
      EXPECT_EQ((*got)[f].round, r.want[f]);
      EXPECT_EQ((*got)[f].digest, f * 1000 + r.want[f]);
    }
  }
}

TEST(ChooseExport, TheRefusalNamesTheRoundsStoredForEveryFragment) {
  auto got = choose_export(stored({{0, 3}, {0, 4}, {1, 4}, {1, 5}}), 2, 3);
  ASSERT_FALSE(got);
  EXPECT_NE(got.err().message.find("rounds stored for every fragment: 4)"), std::string::npos) << got.err().message;
}

TEST(RoundsByNumber, GroupsByRoundOldestFirstAndMarksTheWholeOnes) {
  const auto rounds = rounds_by_number(stored({{1, 4}, {0, 5}, {0, 4}, {1, 3}}), 2);
  ASSERT_EQ(rounds.size(), 3u);
  EXPECT_EQ(rounds[0].round, 3u);
  EXPECT_FALSE(rounds[0].complete);
  EXPECT_EQ(rounds[1].round, 4u);
  EXPECT_TRUE(rounds[1].complete);
  ASSERT_EQ(rounds[1].fragments.size(), 2u);
  EXPECT_EQ(rounds[1].fragments[0].fragment, 0u) << "sorted by fragment";
  EXPECT_EQ(rounds[2].round, 5u);
  EXPECT_FALSE(rounds[2].complete);
}

TEST(RoundsByNumber, ARoundHeldByTwoKeepersCountsOnce) {
  const auto rounds = rounds_by_number(stored({{0, 4}, {0, 4}, {1, 4}, {0, 5}, {0, 5}}), 2);
  ASSERT_EQ(rounds.size(), 2u);
  EXPECT_TRUE(rounds[0].complete);
  EXPECT_EQ(rounds[0].fragments.size(), 2u);
  EXPECT_FALSE(rounds[1].complete) << "fragment 0 twice is not fragments 0 and 1";
  EXPECT_EQ(rounds[1].fragments.size(), 1u);
}

}  // namespace
}  // namespace atl
