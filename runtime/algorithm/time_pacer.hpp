#pragma once
// Time-boxed inner phases (diloco.sync_every_s): the schedule's step as a clock.
//
// With diloco.sync_every_s = T, a fragment syncs every T seconds of training instead of
// every H inner steps. The fragment schedule (fragment_schedule.hpp), the overlap, the
// learning-rate schedule and the run's length keep counting steps, but in time mode a step
// of theirs is a tick of T / H seconds of the worker's training clock: wall time since it
// began training, less the time it was blocked on results. A fast worker trains several
// inner steps in a tick, a slow one needs several ticks for one; both reach each sync point
// at the same time, and their contributions' weights (samples trained) say how much each did.
// Time blocked on a round stops the clock, as a blocked step count stops: a worker that
// waited for a late round falls back in line with the others instead of running ahead.
//
//   start(now, step, blocked_s) --> ticks_at(now, blocked_s) = step + floor(trained_s / tick)
//
// where trained_s = (now - start) - (blocked_s - blocked_s at start). Pure: the worker
// (actors/worker/diloco.cpp) asks it on each step message.
#include <chrono>
#include <cmath>
#include <cstdint>

namespace atl {

class time_pacer {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // tick_s: diloco.sync_every_s / diloco.sync_every (> 0).
  explicit time_pacer(double tick_s) : tick_s_(tick_s) {}

  bool started() const { return started_; }
  // The clock starts at `step` (a joiner's: the step of its newest round) at `now`, with
  // `blocked_s` blocked so far.
  void start(time_point now, std::int64_t step, double blocked_s) {
    started_ = true;
    origin_ = now;
    origin_step_ = step;
    origin_blocked_s_ = blocked_s;
  }
  // The schedule's step the clock has reached (never below the start's).
  std::int64_t ticks_at(time_point now, double blocked_s) const {
    const double trained_s = std::chrono::duration<double>(now - origin_).count() - (blocked_s - origin_blocked_s_);
    if (!started_ || trained_s <= 0) return origin_step_;
    return origin_step_ + static_cast<std::int64_t>(std::floor(trained_s / tick_s_));
  }
  double tick_s() const { return tick_s_; }

 private:
  double tick_s_;
  bool started_ = false;
  time_point origin_{};
  std::int64_t origin_step_ = 0;
  double origin_blocked_s_ = 0;
};

}  // namespace atl
