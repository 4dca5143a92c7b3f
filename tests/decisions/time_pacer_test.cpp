// runtime/algorithm/time_pacer: the schedule's step as a clock (diloco.sync_every_s).
#include <gtest/gtest.h>

#include "runtime/algorithm/time_pacer.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

TEST(TimePacer, CountsTicksOfTrainingTimeFromItsStart) {
  struct row {
    const char* name;
    double tick_s;
    std::int64_t start_step;
    std::chrono::milliseconds elapsed;
    double blocked_since_start_s;
    std::int64_t expected;
  };
  const std::vector<row> rows = {
      // ticks and times exact in binary
      {"at the start", 0.125, 0, 0ms, 0, 0},
      {"within the first tick", 0.125, 0, 124ms, 0, 0},
      {"one tick", 0.125, 0, 125ms, 0, 1},
      {"many ticks at once (a slow step)", 0.125, 0, 1300ms, 0, 10},
      {"a joiner starts at its round's step", 0.125, 400, 250ms, 0, 402},
      {"time blocked on results does not count", 0.125, 0, 1000ms, 0.5, 4},
      {"blocked longer than elapsed (clock skew): the start", 0.125, 7, 100ms, 0.5, 7},
      {"a tick of 2 s", 2.0, 0, 5000ms, 0, 2},
  };
  for (const auto& r : rows) {
    time_pacer p(r.tick_s);
    const time_pacer::time_point t0{};
    const double blocked_before = 3.0;  // blocked before the start: not subtracted again
    p.start(t0, r.start_step, blocked_before);
    EXPECT_TRUE(p.started());
    EXPECT_EQ(p.ticks_at(t0 + r.elapsed, blocked_before + r.blocked_since_start_s), r.expected) << r.name;
  }
}

TEST(TimePacer, BeforeItsStartItIsAtStepZero) {
  time_pacer p(0.5);
  EXPECT_FALSE(p.started());
  EXPECT_EQ(p.ticks_at(time_pacer::time_point{} + 10s, 0), 0);
}

}  // namespace
}  // namespace atl
