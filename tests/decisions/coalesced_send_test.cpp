// When the registry sends what changed (actors/decisions/coalesced_send.hpp): at once after
// a quiet gap, else once for every change within it.
#include <gtest/gtest.h>

#include "actors/decisions/coalesced_send.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

TEST(CoalescedSend, AChangeAfterTheGapGoesAtOnceAndChangesWithinItWaitForOneSending) {
  using verdict = coalesced_send::verdict;
  const auto t0 = coalesced_send::clock::time_point{} + 1h;
  const auto gap = 100ms;
  coalesced_send s;
  struct row {
    const char* what;
    std::chrono::milliseconds at;
    verdict expected;
    std::chrono::milliseconds wait;  // with schedule
  };
  ASSERT_EQ(s.on_change(t0, gap), verdict::send_now) << "the first change";
  s.sent(t0);
  const std::vector<row> rows = {
      {"30 ms after the sending", 30ms, verdict::schedule, 70ms},
      {"another, 60 ms after", 60ms, verdict::already_due, 0ms},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.what);
    EXPECT_EQ(s.on_change(t0 + r.at, gap), r.expected);
    if (r.expected == verdict::schedule) {
      EXPECT_EQ(s.wait(), r.wait);
    }
    EXPECT_TRUE(s.due());
  }
  s.sent(t0 + 100ms);  // the scheduled sending took both
  EXPECT_FALSE(s.due());
  EXPECT_EQ(s.on_change(t0 + 150ms, gap), verdict::schedule);
  EXPECT_EQ(s.wait(), 50ms);
  s.sent(t0 + 200ms);
  EXPECT_EQ(s.on_change(t0 + 400ms, gap), verdict::send_now) << "a change after a quiet gap";
}

}  // namespace
}  // namespace atl
