// actors/decisions/round_commit: how long an unacknowledged commit waits before it is sent again. A
// fixed interval re-sent a large fragment's commit while the keepers were still writing the
// first copy, and each resend added another copy's work (the averaging bench at 64 MiB).
#include <gtest/gtest.h>

#include "actors/decisions/round_commit.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

TEST(CommitRetry, WaitsTwiceAsLongAfterEachUnansweredTryUpToThirtyTwoTimes) {
  struct row {
    int tries;
    std::chrono::milliseconds expected;
  };
  const row rows[] = {{0, 1000ms},  {1, 1000ms},  {2, 2000ms},  {3, 4000ms},    {4, 8000ms},
                      {5, 16000ms}, {6, 32000ms}, {7, 32000ms}, {1000, 32000ms}};
  for (const auto& r : rows) EXPECT_EQ(commit_retry_after(1000ms, r.tries), r.expected) << r.tries << " tries";
}

TEST(CommitRetry, GivesALargeCommitTheTimeItsBytesTakeAtTheFloorRate) {
  struct row {
    int tries;
    std::uint64_t bytes;
    std::chrono::milliseconds expected;
  };
  const row rows[] = {{1, 0, 1000ms},         {1, 8'000'000, 2000ms},  {1, 134'217'728, 17777ms},
                      {2, 8'000'000, 3000ms}, {6, 8'000'000, 33000ms}, {1, 4'000, 1000ms}};
  for (const auto& r : rows)
    EXPECT_EQ(commit_retry_after(1000ms, r.tries, r.bytes), r.expected) << r.tries << " tries, " << r.bytes << " bytes";
}

}  // namespace
}  // namespace atl
