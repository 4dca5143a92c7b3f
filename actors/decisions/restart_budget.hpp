#pragma once
// The decision half of a supervisor (CAF 0.17 has none): after a child fails, restart it
// after an exponential back-off, unless it has already been restarted `max_restarts` times
// within the last `window`; then escalate (the supervisor itself gives up and fails, so
// its own supervisor sees it). Failures older than the window are forgiven, so a child
// that fails rarely over a long run is always restarted. Pure logic over a steady clock,
// so tests drive it with made-up times.
#include <chrono>
#include <cstdint>
#include <deque>

namespace atl {

struct restart_policy {
  int max_restarts = 3;  // R: restarts allowed per window
  std::chrono::milliseconds window{60000};  // T
  std::chrono::milliseconds backoff{500};  // delay before the first restart
  std::chrono::milliseconds max_backoff{30000};  // the doubling stops here
};

class restart_budget {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  struct decision {
    bool restart = false;  // false: escalate
    std::chrono::milliseconds delay{0};  // before the restart
    int recent = 0;  // restarts in the window, this one included
  };

  explicit restart_budget(restart_policy policy = {}) : policy_(policy) {}

  // A failure at `now`: restart (after `delay`) or escalate.
  decision on_failure(time_point now);

 private:
  restart_policy policy_;
  std::deque<time_point> restarts_;  // of the last window
};

}  // namespace atl
