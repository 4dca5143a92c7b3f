#include "actors/decisions/restart_budget.hpp"

#include <algorithm>

namespace atl {

restart_budget::decision restart_budget::on_failure(time_point now) {
  while (!restarts_.empty() && now - restarts_.front() >= policy_.window) restarts_.pop_front();
  decision d;
  if (static_cast<int>(restarts_.size()) >= policy_.max_restarts) {
    d.recent = static_cast<int>(restarts_.size());
    return d;  // escalate
  }
  // Back-off grows with the failures still in the window: a quiet child starts again fast.
  auto delay = policy_.backoff;
  for (std::size_t i = 0; i < restarts_.size() && delay < policy_.max_backoff; ++i) delay *= 2;
  restarts_.push_back(now);
  d.restart = true;
  d.delay = std::min(delay, policy_.max_backoff);
  d.recent = static_cast<int>(restarts_.size());
  return d;
}

}  // namespace atl
