// The worker's side of the data cursor (actors/worker/data_feed.hpp): each step's units in
// lease order, across leases; each fragment's contribution the pieces of its steps since
// the last; leases wanted before the steps run dry.
#include "actors/worker/data_feed.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

using data::chunk_id;
using data::span;
using piece = data_feed::piece;

std::vector<std::uint64_t> units_of(std::uint64_t seed, std::uint64_t begin, std::uint64_t end) {
  std::vector<std::uint64_t> ids;
  for (auto p = begin; p < end; ++p) ids.push_back(data::unit_at(seed, 0, p, 100));
  return ids;
}

TEST(DataFeed, StepsTakeUnitsInLeaseOrderAndContributionsCoverTheirStepsOnce) {
  data_feed feed(100, 10, 4, 2);  // N 100, chunks of 10, 4 a step, two fragments
  EXPECT_TRUE(feed.wants_lease()) << "nothing leased yet";
  EXPECT_TRUE(feed.starved());
  EXPECT_FALSE(feed.take_step(0)) << "no units: the step waits";
  feed.set_asked(true);
  EXPECT_FALSE(feed.wants_lease()) << "one request at a time";
  feed.leased({0, 0}, {0, 10}, 7);
  feed.set_asked(false);
  EXPECT_FALSE(feed.starved()) << "a step's units wait: a worker blocked now waits on something else";
  EXPECT_EQ(*feed.take_step(0), units_of(7, 0, 4));
  EXPECT_TRUE(feed.wants_lease()) << "6 left of a 10-unit chunk: the next is asked for ahead";
  EXPECT_EQ(*feed.take_step(1), units_of(7, 4, 8));
  EXPECT_FALSE(feed.take_step(2)) << "2 left, a step takes 4";
  feed.leased({0, 3}, {30, 40}, 7);
  auto step2 = feed.take_step(2);  // 2 from chunk 0, 2 from chunk 3
  ASSERT_TRUE(step2);
  auto want = units_of(7, 8, 10);
  for (auto u : units_of(7, 30, 32)) want.push_back(u);
  EXPECT_EQ(*step2, want);

  // Fragment 0 contributes at step 2 (steps 0 and 1), fragment 1 at step 3 (steps 0 to 2).
  EXPECT_EQ(feed.contribution(0, 2), (std::vector<piece>{{chunk_id{0, 0}, span{0, 8}}}));
  EXPECT_EQ(feed.contribution(1, 3),
            (std::vector<piece>{{chunk_id{0, 0}, span{0, 10}}, {chunk_id{0, 3}, span{30, 32}}}));
  EXPECT_EQ(feed.contribution(0, 3),
            (std::vector<piece>{{chunk_id{0, 0}, span{8, 10}}, {chunk_id{0, 3}, span{30, 32}}}))
      << "fragment 0's next covers step 2 alone";
  EXPECT_TRUE(feed.contribution(0, 3).empty()) << "a contribution covers a step once";
  EXPECT_TRUE(feed.contribution(5, 3).empty()) << "no such fragment";
}

// Found by the seeded fault tier: a DataLease delivered twice fed its chunk twice, and the
// worker tied the same positions to two rounds (the cursor refused the second tie).
TEST(DataFeed, AChunkGivenTwiceIsTrainedOnce) {
  data_feed feed(100, 10, 5, 1);
  EXPECT_TRUE(feed.leased({0, 2}, {20, 30}, 1));
  EXPECT_FALSE(feed.leased({0, 2}, {20, 30}, 1)) << "the same lease again";
  ASSERT_TRUE(feed.take_step(0));
  ASSERT_TRUE(feed.take_step(1));
  EXPECT_FALSE(feed.take_step(2)) << "its ten units were taken once";
  EXPECT_EQ(feed.contribution(0, 2), (std::vector<piece>{{chunk_id{0, 2}, span{20, 30}}}));
  EXPECT_TRUE(feed.leased({0, 3}, {30, 40}, 1)) << "the next chunk is fed";
}

TEST(DataFeed, TheRunsDataIsExhaustedOnceEveryEpochIsLeasedAndTheLastStepTaken) {
  data_feed feed(100, 10, 4, 1);
  feed.leased({0, 9}, {90, 96}, 1);
  feed.run_out();
  EXPECT_FALSE(feed.wants_lease()) << "nothing more to lease";
  EXPECT_FALSE(feed.exhausted()) << "6 units still wait";
  ASSERT_TRUE(feed.take_step(0));
  EXPECT_TRUE(feed.exhausted()) << "2 left, fewer than a step";
}

}  // namespace
}  // namespace atl
