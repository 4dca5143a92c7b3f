#include "actors/decisions/round_commit.hpp"

#include <algorithm>

namespace atl {

std::chrono::milliseconds commit_retry_after(std::chrono::milliseconds base, int tries, std::uint64_t bytes) {
  const auto transfer = std::chrono::milliseconds(static_cast<std::int64_t>(1e3 * bytes / commit_floor_bytes_per_s));
  return base * (1 << std::clamp(tries - 1, 0, 5)) + transfer;
}

round_commit::effects round_commit::start(std::uint64_t round, std::uint64_t bytes, bool early_results,
                                          time_point now) {
  active_ = true;
  round_ = round;
  bytes_ = bytes;
  early_results_ = early_results;
  results_ = results::unsent;
  acked_.clear();
  writing_.clear();
  behind_.clear();
  tries_ = 0;
  return send_unacknowledged(now);
}

bool round_commit::is_keeper(const std::string& keeper) const {
  return std::find(keepers_.begin(), keepers_.end(), keeper) != keepers_.end();
}

round_commit::effects round_commit::settled_or_provisional() {
  effects out;
  if (!active_) return out;
  if (committed()) {
    out.committed = true;
  } else if (early_results_ && results_ == results::unsent && every_keeper_has_it()) {
    out.send_provisional = true;
    results_ = results::provisional;
  }
  return out;
}

round_commit::effects round_commit::on_answer(const std::string& keeper, std::uint64_t round, answer a) {
  if (!active_ || round != round_) return {};  // (5): a late or duplicate answer
  switch (a) {
    case answer::writing:  // (2)
      if (!writing_.insert(keeper).second) return {};
      return settled_or_provisional();
    case answer::behind:  // (3)
      if (!is_keeper(keeper) || !behind_.insert(keeper).second) return {};
      return {{keeper}, false, false};
    case answer::refused: return {};  // (5): sent again when a retry is due
    case answer::acknowledged: {  // (4)
      if (!is_keeper(keeper) || !acked_.insert(keeper).second) return {};
      effects out;
      out.committed = committed();
      return out;
    }
  }
  return {};
}

round_commit::effects round_commit::set_keepers(std::vector<std::string> keepers) {
  keepers_ = std::move(keepers);
  return settled_or_provisional();
}

round_commit::effects round_commit::send_unacknowledged(time_point now) {
  effects out;
  out.send_to = unacknowledged();
  sent_ = now;
  tries_++;
  return out;
}

round_commit::effects round_commit::tick(time_point now, std::chrono::milliseconds base) {
  if (!active_ || committed() || now - sent_ < commit_retry_after(base, tries_, bytes_)) return {};
  return send_unacknowledged(now);
}

round_commit::results round_commit::settle() {
  const auto was = results_;
  active_ = false;
  results_ = results::unsent;
  return was;
}

bool round_commit::committed() const {
  return active_ &&
         std::all_of(keepers_.begin(), keepers_.end(), [&](const std::string& k) { return acked_.count(k); });
}

bool round_commit::every_keeper_has_it() const {
  return active_ && std::all_of(keepers_.begin(), keepers_.end(),
                                [&](const std::string& k) { return acked_.count(k) || writing_.count(k); });
}

std::vector<std::string> round_commit::unacknowledged() const {
  std::vector<std::string> out;
  for (const auto& k : keepers_)
    if (!acked_.count(k)) out.push_back(k);
  return out;
}

}  // namespace atl
