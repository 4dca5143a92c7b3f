#pragma once
// The keeper's copy of each fragment's state, kept to apply the next record to
// (actors/keeper/keeper.hpp): the records acknowledged so far applied in order, follow_delay
// after the first or before anything reads the copy, and every storage.snapshot_every
// rounds a snapshot of the copy written by a detached writer, one at a time.
#include <chrono>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/keeper/state.hpp"

namespace atl::keeper_detail {

using self_ptr = caf::stateful_actor<keeper_state>*;

// How long after a record's acknowledgement the keeper applies it.
constexpr std::chrono::milliseconds follow_delay{50};
// Applies the records acknowledged so far, in order (`timer`: the follow timer fired).
void follow_pending(self_ptr self, bool timer = false);
// The written snapshot named in the store (or let go, said why): its writer is done.
void finish_snapshot(self_ptr self);

}  // namespace atl::keeper_detail
