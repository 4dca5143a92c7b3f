#pragma once
// The node's workers: each spawned with the run's configuration (a CPU worker with the
// thread layouts to try), watched, and restarted within its budget
// (actors/decisions/restart_budget.hpp). What the agent must do next comes back to it.
#include <cstddef>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/node/state.hpp"

namespace atl::node_workers {

using self_ptr = caf::stateful_actor<node_agent_state>*;

// Worker `index` of the node (its slot in node_agent_state::workers) started; a replica
// that cannot be built is logged and leaves the slot empty.
void spawn(self_ptr self, std::size_t index);

// A worker's down message: a failed one restarted after its budget's delay (restart_atom),
// or the node gives up (it failed too often); nothing left to do, or every worker finished.
struct down_outcome {
  enum what_next { nothing, give_up, every_worker_finished } what = nothing;
  error why;  // give_up: the worker and how often it failed
};
down_outcome on_down(self_ptr self, const caf::down_msg& down);

}  // namespace atl::node_workers
