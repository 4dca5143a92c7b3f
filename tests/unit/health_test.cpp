#include "runtime/process/health.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

using namespace std::chrono_literals;

// A process's health as its probes read it (runtime/process/health.hpp).
TEST(ProcessHealth, LiveWhileItBeatsWithinTheGraceAndReadyOnlyWhenAlsoAMember) {
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  process_health health(t0);
  const struct {
    std::chrono::seconds at;
    std::uint64_t epoch;  // set_ready_in before the read
    bool live, ready;
  } table[] = {
      {0s, 0, true, false},  // started: alive, not a member yet
      {2s, 0, true, false},  // within the 3 s grace
      {4s, 0, false, false},  // no beat for 4 s: not live
      {4s, 7, false, false},  // a member, but stuck: not ready either
  };
  for (const auto& row : table) {
    health.set_ready_in(row.epoch);
    const health_report r = health.read(t0 + row.at, 3s);
    EXPECT_EQ(r.live, row.live) << row.at.count() << " s";
    EXPECT_EQ(r.ready, row.ready) << row.at.count() << " s";
  }
  health.beat(t0 + 5s);
  const health_report r = health.read(t0 + 6s, 3s);
  EXPECT_TRUE(r.live);
  EXPECT_TRUE(r.ready);
  EXPECT_EQ(r.epoch, 7u);
  EXPECT_DOUBLE_EQ(r.since_beat_s, 1.0);
  health.set_ready_in(0);  // registering again, or leaving
  EXPECT_FALSE(health.read(t0 + 6s, 3s).ready);
}

TEST(ProcessHealth, ABeatIsRecentUpToTheGraceInclusive) {
  const auto t = std::chrono::steady_clock::time_point{} + 1h;
  EXPECT_TRUE(beat_is_recent(t, t + 3s, 3s));
  EXPECT_FALSE(beat_is_recent(t, t + 3s + 1ns, 3s));
  EXPECT_TRUE(beat_is_recent(t + 1s, t, 3s)) << "a beat read a moment after the reader's clock";
}

}  // namespace
}  // namespace atl
