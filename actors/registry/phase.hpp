#pragma once
// The run's phase moved as actors/decisions/run_phase.hpp decides from what the registry
// knows now: waiting -> training once run.min_workers take part (coordinators and keepers
// placed); training -> finished once no live worker trains and the merged rounds are
// reported (every node still there is then told to stop: run_finished_reason).
#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

// Called after anything that may change the phase, and each tick (a summary waiting for a
// RoundReport gives up in time).
void update_run_phase(self_ptr self);

}  // namespace atl::registry_detail
