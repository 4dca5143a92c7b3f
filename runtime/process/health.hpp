#pragma once
// A process's health as its probes see it (Kubernetes' liveness and readiness probes,
// deploy/kubernetes; `atoll join --health`, `atoll up --http`):
//
//   live   its own actor system still turns: the actor that beats (a node's agent, on each
//          heartbeat tick, which runs whether or not the head answers) beat within the grace.
//          Nothing outside the process is asked, so a head that is down or a standby taking
//          over never fails it: no restart storm.
//   ready  a node: a member of the run in its current epoch (welcomed, not registering again,
//          not leaving); a head: leading.
//
// Written by one actor, read by the probe's thread: atomics, no lock.
#include <atomic>
#include <chrono>
#include <cstdint>

namespace atl {

struct health_report {
  bool live = false;
  bool ready = false;
  double since_beat_s = 0;  // seconds since the last beat
  std::uint64_t epoch = 0;  // the membership epoch it is ready in (0: not ready)
};

// True while the last beat is within `grace` of `now` (a beat in the future counts as now).
inline bool beat_is_recent(std::chrono::steady_clock::time_point last, std::chrono::steady_clock::time_point now,
                           std::chrono::steady_clock::duration grace) {
  return now - last <= grace;
}

class process_health {
 public:
  using clock = std::chrono::steady_clock;
  explicit process_health(clock::time_point started = clock::now()) { beat(started); }

  void beat(clock::time_point now) { last_beat_.store(now.time_since_epoch().count(), std::memory_order_relaxed); }
  // A member in `epoch` (0: not a member, or leaving).
  void set_ready_in(std::uint64_t epoch) { ready_epoch_.store(epoch, std::memory_order_relaxed); }

  health_report read(clock::time_point now, clock::duration grace) const {
    const clock::time_point last{clock::duration{last_beat_.load(std::memory_order_relaxed)}};
    health_report r;
    r.live = beat_is_recent(last, now, grace);
    r.epoch = ready_epoch_.load(std::memory_order_relaxed);
    r.ready = r.live && r.epoch != 0;
    r.since_beat_s = std::chrono::duration<double>(now - last).count();
    return r;
  }

 private:
  std::atomic<clock::rep> last_beat_{0};
  std::atomic<std::uint64_t> ready_epoch_{0};
};

}  // namespace atl
