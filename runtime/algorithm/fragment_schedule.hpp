#pragma once
// When each fragment syncs. Fragment p syncs at inner steps t > 0 with
// (t - offset_p) mod H == 0, offset_p = round(p * H / P), so syncs are spread evenly
// over the H steps. Round r of a fragment is the r-th outer update; round 0 is the
// initial state every worker starts from.
//
// The schedule is asked by sync unit (runtime/process/config.hpp, sync_units): with S
// shards, unit u is slice u mod S of fragment u / S, and syncs when its fragment does.
#include <cstdint>

namespace atl {

class fragment_schedule {
 public:
  fragment_schedule(std::int64_t sync_every, std::int64_t fragments, std::int64_t shards = 1)
      : h_(sync_every), p_(fragments), s_(shards < 1 ? 1 : shards) {}

  std::int64_t offset(std::int64_t unit) const { return ((unit / s_) * h_ * 2 + p_) / (2 * p_); }
  bool syncs_at(std::int64_t unit, std::int64_t step) const {
    const auto t = step - offset(unit);
    return step > 0 && t >= 0 && t % h_ == 0;
  }
  // The round closed by a sync of `unit` at `step` (precondition: syncs_at).
  std::uint64_t round_at(std::int64_t unit, std::int64_t step) const {
    return static_cast<std::uint64_t>((step - offset(unit)) / h_ + (offset(unit) > 0 ? 1 : 0));
  }
  // The sync step that closes `round` of `unit` (the inverse of round_at). Below 1 for
  // round 0 (the initial state, no sync).
  std::int64_t step_of(std::int64_t unit, std::uint64_t round) const {
    return offset(unit) + (static_cast<std::int64_t>(round) - (offset(unit) > 0 ? 1 : 0)) * h_;
  }
  // The last round whose sync step is at or before `step` (0: none yet).
  std::uint64_t last_round_by(std::int64_t unit, std::int64_t step) const {
    const auto first = step_of(unit, 1);
    if (step < first) return 0;
    return 1 + static_cast<std::uint64_t>((step - first) / h_);
  }
  std::int64_t sync_every() const { return h_; }
  std::int64_t fragments() const { return p_; }

 private:
  std::int64_t h_;
  std::int64_t p_;
  std::int64_t s_;
};

}  // namespace atl
