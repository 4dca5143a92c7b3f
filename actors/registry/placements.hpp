#pragma once
// Where coordinators and replica keepers run, as actors/decisions/placement.hpp decides it,
// applied to the registry's state: persisted first, then the routes and placements sent.
#include <vector>

#include "actors/decisions/placement.hpp"
#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

// Coordinators moved (placed for the first time, or away from a gone host); `warn` logs
// the reasons as warnings.
void apply_coordinator_moves(self_ptr self, const std::vector<placement::coordinator_move>& moves, bool warn);
void replace_orphaned_coordinators(self_ptr self);
void place_replica_keepers(self_ptr self);
// A run that has placed no replica yet gets the keeper groups its slices call for (one
// stays one otherwise: a group's stores hold its units' round logs); one hand-over record
// per group either way. At the registry's start, before anything is placed.
void size_keeper_groups(registry_state& st);
// The next steps of a replica's hand-over off a draining node (placement::decide_handover),
// and Shutdown to the draining nodes that may go.
void advance_handover(self_ptr self);

}  // namespace atl::registry_detail
