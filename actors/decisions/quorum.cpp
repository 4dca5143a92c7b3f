#include "actors/decisions/quorum.hpp"

#include <algorithm>

namespace atl::quorum {

std::size_t needed(const view& v, const options& opt) { return v.published > 0 ? v.published : opt.min_workers; }

bool members_suffice(const view& v, const options& opt) {
  return v.has_membership && v.members > 0 && v.members >= needed(v, opt);
}

verdict decide(const view& v, const options& opt, time_point now) {
  const std::size_t quorum = needed(v, opt);
  if (!v.has_membership) return {decision::wait, reason::no_membership, quorum};
  if (!v.round_open) {
    if (!members_suffice(v, opt)) return {decision::wait, reason::too_few_members, quorum};
    return {decision::open, reason::enough_members, quorum};
  }
  // An open round is judged by its participants: members that left were dropped from it.
  const std::size_t majority = std::max(quorum, v.participants / 2 + 1);
  const bool deadline_passed =
      opt.round_deadline.count() > 0 && v.first_contribution && now - *v.first_contribution >= opt.round_deadline;
  if (opt.adaptive && v.first_contribution && v.contributed >= majority) {
    const auto ends = *v.first_contribution + grace_window(v.arrivals, opt.grace_k, opt.grace_min, opt.grace_max);
    if (now >= ends) return {decision::close, reason::grace_with_majority, majority};
    if (deadline_passed) return {decision::close, reason::deadline_with_majority, majority};  // whichever comes first
    return {decision::collect, reason::in_grace, majority, ends};
  }
  if (!deadline_passed) return {decision::collect, reason::collecting, quorum};
  if (v.contributed >= majority) return {decision::close, reason::deadline_with_majority, majority};
  return {decision::collect, reason::deadline_without_majority, majority};
}

std::chrono::steady_clock::duration grace_window(std::vector<std::chrono::steady_clock::duration> arrivals, double k,
                                                 std::chrono::milliseconds lo, std::chrono::milliseconds hi) {
  using duration = std::chrono::steady_clock::duration;
  const auto median = [](std::vector<duration>& xs) {
    const auto mid = xs.begin() + static_cast<std::ptrdiff_t>(xs.size() / 2);
    std::nth_element(xs.begin(), mid, xs.end());
    if (xs.size() % 2 == 1) return *mid;
    const auto below = *std::max_element(xs.begin(), mid);
    return below + (*mid - below) / 2;
  };
  duration grace = duration::zero();
  if (!arrivals.empty()) {
    const auto med = median(arrivals);
    std::vector<duration> deviations;
    deviations.reserve(arrivals.size());
    for (const auto a : arrivals) deviations.push_back(a > med ? a - med : med - a);
    const auto mad = median(deviations);
    grace = med + std::chrono::duration_cast<duration>(mad * std::max(0.0, k));
  }
  return std::clamp<duration>(grace, lo, std::max<duration>(lo, hi));
}

std::uint32_t required_participants(std::size_t min_workers, std::size_t live_workers, bool tail) {
  const std::size_t n = tail ? std::max<std::size_t>(1, std::min(min_workers, live_workers)) : min_workers;
  return static_cast<std::uint32_t>(n);
}

const char* to_string(decision d) {
  switch (d) {
    case decision::wait: return "wait";
    case decision::open: return "open";
    case decision::collect: return "collect";
    case decision::close: return "close";
  }
  return "unknown";
}

const char* to_string(reason r) {
  switch (r) {
    case reason::no_membership: return "no membership from the registry yet";
    case reason::too_few_members: return "fewer members than the quorum";
    case reason::enough_members: return "a quorum of members";
    case reason::collecting: return "collecting contributions";
    case reason::deadline_with_majority: return "deadline passed with a quorum and a majority";
    case reason::deadline_without_majority: return "deadline passed without a quorum and a majority";
    case reason::in_grace: return "a majority in, waiting out the adaptive grace for the rest";
    case reason::grace_with_majority: return "adaptive grace passed with a quorum and a majority";
  }
  return "unknown";
}

}  // namespace atl::quorum
