#include "actors/decisions/restart_budget.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

using namespace std::chrono_literals;

restart_policy three_in_ten_seconds() {
  restart_policy p;
  p.max_restarts = 3;
  p.window = 10s;
  p.backoff = 100ms;
  p.max_backoff = 300ms;
  return p;
}

TEST(RestartBudget, RestartsWithGrowingBackOffThenEscalates) {
  restart_budget budget(three_in_ten_seconds());
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  auto d = budget.on_failure(t0);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.delay, 100ms);
  d = budget.on_failure(t0 + 1s);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.delay, 200ms);
  d = budget.on_failure(t0 + 2s);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.delay, 300ms);  // capped at max_backoff
  EXPECT_EQ(d.recent, 3);
  d = budget.on_failure(t0 + 3s);  // a fourth within 10 s
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.recent, 3);
}

TEST(RestartBudget, FailuresOlderThanTheWindowAreForgiven) {
  restart_budget budget(three_in_ten_seconds());
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(budget.on_failure(t0 + i * 1s).restart);
  // 10 s after the first: it has left the window, so one more restart is allowed, with
  // the back-off of the two still in it.
  auto d = budget.on_failure(t0 + 10s);
  EXPECT_TRUE(d.restart);
  EXPECT_EQ(d.delay, 300ms);
  EXPECT_EQ(d.recent, 3);
  // A child that fails once a minute is restarted forever, each time at the first delay.
  restart_budget rare(three_in_ten_seconds());
  for (int i = 0; i < 20; ++i) {
    d = rare.on_failure(t0 + i * 60s);
    ASSERT_TRUE(d.restart) << "failure " << i;
    EXPECT_EQ(d.delay, 100ms);
  }
}

TEST(RestartBudget, ZeroRestartsEscalatesAtOnce) {
  auto policy = three_in_ten_seconds();
  policy.max_restarts = 0;
  restart_budget budget(policy);
  EXPECT_FALSE(budget.on_failure(std::chrono::steady_clock::time_point{} + 1h).restart);
}

}  // namespace
}  // namespace atl
