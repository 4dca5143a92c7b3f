#pragma once
// How a worker steps: DiLoCo (actors/worker/diloco.cpp) or the synchronous data-parallel
// baseline (actors/worker/ddp.cpp). The shell (actors/worker/worker.cpp) runs one `step`
// message at a time through it. The interface sits with the state that holds it, below
// every file of the worker; its two implementations sit above the files they call.
#include <cstddef>
#include <memory>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/worker/state.hpp"

namespace atl {

using worker_self = caf::stateful_actor<worker_state>*;

class step_strategy {
 public:
  virtual ~step_strategy() = default;
  // One `step` message while training.
  virtual void step(worker_self self) = 0;
  // Fragment f's result is here (fragment_sync::has_result).
  virtual void result_arrived(worker_self self, std::size_t f) = 0;
  // Held-out loss of the global model.
  virtual float evaluate_global(worker_state& st) = 0;
  // DiLoCo's rounds recover from lost messages (refusals, resends, overdue results) and a
  // joiner starts at the step of its newest round; ddp's one round per step does neither.
  virtual bool recovers_rounds() const = 0;
};

std::unique_ptr<step_strategy> make_diloco_steps();
std::unique_ptr<step_strategy> make_ddp_steps();

}  // namespace atl
