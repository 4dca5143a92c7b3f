#include "actors/decisions/commit_barrier.hpp"

#include <algorithm>

namespace atl {

std::chrono::milliseconds commit_retry_after(std::chrono::milliseconds base, int tries, std::uint64_t bytes) {
  const auto transfer = std::chrono::milliseconds(static_cast<std::int64_t>(1e3 * bytes / commit_floor_bytes_per_s));
  return base * (1 << std::clamp(tries - 1, 0, 5)) + transfer;
}

void commit_barrier::start(std::uint64_t round, std::uint64_t bytes) {
  active_ = true;
  round_ = round;
  bytes_ = bytes;
  acked_.clear();
  writing_.clear();
  behind_.clear();
  tries_ = 0;
}

void commit_barrier::set_keepers(std::vector<std::string> keepers) { keepers_ = std::move(keepers); }

bool commit_barrier::is_keeper(const std::string& keeper) const {
  return std::find(keepers_.begin(), keepers_.end(), keeper) != keepers_.end();
}

commit_barrier::action commit_barrier::on_answer(const std::string& keeper, std::uint64_t round, answer a) {
  if (!active_ || round != round_) return action::none;  // a late or duplicate answer
  switch (a) {
    case answer::writing:
      if (!writing_.insert(keeper).second) return action::none;
      return every_keeper_has_it() ? action::early_results : action::none;
    case answer::behind:
      if (!is_keeper(keeper) || !behind_.insert(keeper).second) return action::none;
      return action::send_full_state;
    case answer::refused: return action::none;  // sent again when a retry is due
    case answer::acknowledged:
      if (!is_keeper(keeper) || !acked_.insert(keeper).second) return action::none;
      return committed() ? action::committed : action::none;
  }
  return action::none;
}

void commit_barrier::sent(time_point now) {
  sent_ = now;
  tries_++;
}

bool commit_barrier::committed() const {
  return active_ &&
         std::all_of(keepers_.begin(), keepers_.end(), [&](const std::string& k) { return acked_.count(k); });
}

bool commit_barrier::every_keeper_has_it() const {
  return active_ && std::all_of(keepers_.begin(), keepers_.end(),
                                [&](const std::string& k) { return acked_.count(k) || writing_.count(k); });
}

bool commit_barrier::retry_due(time_point now, std::chrono::milliseconds base) const {
  return active_ && !committed() && now - sent_ >= commit_retry_after(base, tries_, bytes_);
}

std::vector<std::string> commit_barrier::unacknowledged() const {
  std::vector<std::string> out;
  for (const auto& k : keepers_)
    if (!acked_.count(k)) out.push_back(k);
  return out;
}

const char* to_string(commit_barrier::action a) {
  switch (a) {
    case commit_barrier::action::none: return "none";
    case commit_barrier::action::send_full_state: return "send_full_state";
    case commit_barrier::action::early_results: return "early_results";
    case commit_barrier::action::committed: return "committed";
  }
  return "unknown";
}

}  // namespace atl
