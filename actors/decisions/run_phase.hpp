#pragma once
// When the run's phase moves (the registry is the shell that gathers the facts and applies
// the step). Pure: no CAF, no clock of its own.
//
//   waiting --(1) live workers >= run.min_workers--> training (coordinators placed)
//   training --(2) no live worker trains, and one finished--> finishing:
//       (3) a round committed is not reported yet, within the grace --> wait
//       (4) every committed round reported, or the grace passed     --> finished
//   training --(5) a live worker still trains--> stay (the finishing clock restarts)
//   finished --> stays
#include <chrono>
#include <cstddef>
#include <optional>

#include "actors/decisions/membership.hpp"

namespace atl {

// How long a finished run's summary waits for a RoundReport still on its way (a coordinator
// killed between a release and its report never sends one).
constexpr std::chrono::seconds unreported_round_grace{5};

struct run_facts {
  run_phase phase = run_phase::waiting;
  std::size_t min_workers = 1;  // run.min_workers
  std::size_t live_workers = 0;  // workers of nodes that take part
  std::size_t live_training = 0;  // of those, not finished
  bool any_finished = false;  // some worker finished (its node may have left since)
  // A round that may be committed has not been reported: a worker acknowledged it, its
  // coordinator's progress says so, or a coordinator has not said where it is yet.
  bool committed_round_unreported = false;
  // How long no live worker has trained (since the registry first saw it); nullopt: the
  // registry sees it now for the first time.
  std::optional<std::chrono::steady_clock::duration> all_done_for;
};

enum class run_step {
  stay,  // nothing changes
  start,  // (1) waiting -> training
  wait_for_reports,  // (3) finishing: start or keep the clock, decide again later
  finish,  // (4) training -> finished
  restart_clock,  // (5) a worker trains: forget when all were done
};
const char* to_string(run_step s);

run_step decide_run_step(const run_facts& f);

}  // namespace atl
