#pragma once
// Worker actor ("worker/N.K"): a model replica that trains alone and takes part in the
// outer rounds of every fragment. Spawned detached (it owns a thread: inner steps are
// blocking LibTorch work); one inner step per `step` message, so wire messages are
// handled between steps.
//
//   syncing --every fragment synced--> training --a result due and not yet here--> blocked
//   syncing --every fragment synced, a joiner--> syncing, warming: a live peer's
//       inner-optimizer state (actors/worker/warm.cpp) --installed, or none to be had--> training
//   blocked --the result, or the state it waited for--> training
//   training --step == run.steps and every result merged--> finished: WorkerDone, quit
//
// Each fragment's sync is its own state machine (actors/decisions/fragment_sync.hpp): StateRequests
// repeat every 2 s until answered (coordinators are placed when the run starts); a large
// fragment's state comes in chunks from the keepers (actors/decisions/state_fetch.hpp, run by
// actors/worker/state_intake.cpp), moving to the next keeper when one is silent for 2 s or
// cannot serve. Epochs are per fragment: each
// coordinator opens its rounds in its own epoch.
//
// How it steps is a strategy (actors/worker/steps.hpp):
// - DiLoCo / Streaming DiLoCo (run.mode = diloco, actors/worker/diloco.cpp): after step t
//   where fragment p is due ((t - offset_p) mod H == 0), Contribution(encode(theta_global_p
//   - theta_local_p [+ residual])) to coord/p for the round the schedule gives step t (so
//   every worker contributes round r of p at the same step, whatever it lost); the result
//   is merged before step t + tau trains (theta_local_p = alpha * theta_local_p + (1 -
//   alpha) * theta_global_p; tau = 0, alpha = 0 is plain DiLoCo) and its digest goes to the
//   registry (RoundAck).
// - Data-parallel baseline (run.mode = ddp, actors/worker/ddp.cpp): every step the worker
//   sends its gradients, waits for the average, then takes its AdamW step.
//
// Rank 0 evaluates theta_global on the held-out data every run.eval_every steps and at
// the end.
//
// Its files are layered, top down; each calls only the layers below it, never a file
// beside it (tools/check/layering.sh holds every include to this drawing):
//   worker.cpp                         the shell: each message to its handler, ticks,
//                                      results and refusals, and resuming once synced
//   diloco.cpp, ddp.cpp                how it steps (strategy.hpp, below, is the interface)
//   state_intake.cpp warm.cpp data.cpp committed state, a warm start, the data feed coming
//                                      in; they say when the worker may resume (the shell
//                                      resumes it), never resume it themselves
//   steps.cpp                          sends, reports, waits and the end
//   state.hpp, strategy.hpp, replica   what it holds
#include <caf/stateful_actor.hpp>

#include "actors/worker/state.hpp"

namespace atl {

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory);

}  // namespace atl
