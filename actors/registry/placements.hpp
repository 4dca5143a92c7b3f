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
// The next steps of a replica's hand-over off a draining node (placement::decide_handover),
// and Shutdown to the draining nodes that may go.
void advance_handover(self_ptr self);

}  // namespace atl::registry_detail
