#include "actors/decisions/keeper_machine.hpp"

#include <algorithm>
#include <string>

namespace atl {

keeper_machine::keeper_machine(std::string source, std::uint32_t fragments, const std::vector<std::uint32_t>& kept)
    : source_(std::move(source)), fragments_(fragments) {
  if (kept.empty())
    for (std::uint32_t f = 0; f < fragments; ++f) missing_.insert(f);
  for (const auto f : kept)
    if (f < fragments) missing_.insert(f);
}

keeper_machine::catch_up keeper_machine::on_load_reply(const std::string& sender, std::uint32_t fragment) {
  if (sender != source_) return catch_up::refuse;
  if (missing_.erase(fragment) == 0) return catch_up::ignore;
  return catch_up::store_if_newer;
}

void keeper_machine::raise(std::uint32_t fragment, std::uint64_t epoch) {
  auto& w = writer_epoch_[fragment];
  w = std::max(w, epoch);
}

void keeper_machine::coordinator_loading(std::uint32_t fragment, std::uint64_t epoch) { raise(fragment, epoch); }

status keeper_machine::fence(const commit_identity& commit, const std::optional<stored_round>& stored) {
  // The stored epoch counts too, so a restarted keeper keeps the fence.
  if (stored) raise(commit.fragment, stored->epoch);
  const auto floor = writer_epoch(commit.fragment);
  if (commit.epoch >= floor) return {};
  if (stored && stored->round == commit.round && stored->digest == commit.theta_digest) return {};
  return make_error(errc::stale_epoch, "commit of fragment " + std::to_string(commit.fragment) + " round " +
                                           std::to_string(commit.round) + " from epoch " +
                                           std::to_string(commit.epoch) + ": a coordinator of epoch " +
                                           std::to_string(floor) + " took over");
}

void keeper_machine::committed(std::uint32_t fragment, std::uint64_t epoch) {
  raise(fragment, epoch);
  missing_.erase(fragment);
}

std::uint64_t keeper_machine::writer_epoch(std::uint32_t fragment) const {
  auto it = writer_epoch_.find(fragment);
  return it == writer_epoch_.end() ? 0 : it->second;
}

bool keeper_machine::acknowledged(const commit_identity& record, const std::optional<followed_at>& followed,
                                  bool& schedule) {
  schedule = false;
  // A retry of what the copy is at already, or of a record waiting.
  if (followed && followed->round == record.round && followed->epoch >= record.epoch) return false;
  const bool waiting = std::any_of(queued_.begin(), queued_.end(), [&](const commit_identity& q) {
    return q.fragment == record.fragment && q.round == record.round && q.theta_digest == record.theta_digest;
  });
  if (waiting) return false;
  queued_.push_back(record);
  schedule = !follow_scheduled_;
  follow_scheduled_ = true;
  return true;
}

std::size_t keeper_machine::take_pending(bool timer) {
  const auto n = queued_.size();
  queued_.clear();
  if (timer) follow_scheduled_ = false;
  return n;
}

bool keeper_machine::start_snapshot(time_point now) {
  if (snapshot_started_) return false;
  snapshot_started_ = now;
  return true;
}

double keeper_machine::finish_snapshot(time_point now) {
  if (!snapshot_started_) return 0;
  const double s = std::chrono::duration<double>(now - *snapshot_started_).count();
  snapshot_started_.reset();
  return s;
}

}  // namespace atl
