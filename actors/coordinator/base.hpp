#pragma once
// What every file of the coordinator shares (actors/coordinator/coordinator.hpp draws
// them): its actor pointer, its name in the log, and the epoch its refusals carry.
#include <cstdint>
#include <string>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/coordinator/state.hpp"

namespace atl::coordinator_detail {

using self_ptr = caf::stateful_actor<coordinator_state>*;

inline std::string fragment_name(const coordinator_state& st) {
  return "coordinator " + std::to_string(st.cfg.fragment);
}

// The epoch a refusal carries: the open round's, so a worker refused as stale_epoch can
// send the same contribution again in the right epoch.
inline std::uint64_t refusal_epoch(const coordinator_state& st) {
  return st.rounds->current_phase() == round_tracker::phase::collecting ? st.rounds->open_epoch() : st.epoch();
}

}  // namespace atl::coordinator_detail
