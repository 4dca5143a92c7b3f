#pragma once
// The run's state as conditions, the way Kubernetes objects report theirs (issue 69): each of
// Training, Degraded, Restarting and Finished is true or false with a reason (one word, for
// a program) and a message (for a person), so that an operator or a dashboard reads state,
// not log lines (`atollctl status --json`, `/api/status`, "conditions").
//
//   Training    true while the run trains (phase training, a worker not done);
//               false: Waiting (fewer workers than run.min_workers), Finishing, Finished
//   Degraded    true when training goes on with less than it should have, the first
//               that holds of: NoCoordinator (a fragment's coordinator is not placed),
//               MembersDead (within stall_after), OneCopy (a replica keeper slot is empty: committed rounds are
//               on fewer machines than storage.keepers asks), Stalled (no round
//               committed for stall_after); else Healthy. The message names every one.
//   Restarting  true while members join or sync during training once a round was committed
//               (before it every member syncs: the run starting) (new, or back after a
//               death: a restarted pod joins again) or a worker process restarted within
//               restart_window; its message counts worker restarts, dead and joining members
//   Finished    true once the run's phase is finished
//
// Pure (atoll_decisions): the registry gathers the facts (actors/registry/views.cpp).
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actors/decisions/membership.hpp"

namespace atl {

struct condition_facts {
  run_phase phase = run_phase::waiting;
  std::size_t min_workers = 1;
  std::size_t live_workers = 0;  // workers of nodes that take part
  std::size_t workers_done = 0;  // of those, finished
  std::size_t dead_members = 0;  // that died within stall_after (dead ones stay listed)
  std::size_t returning_members = 0;  // joining or syncing while the run trains
  std::size_t fragments = 0;  // sync units with a coordinator
  std::size_t fragments_unplaced = 0;
  std::size_t keeper_slots = 0;  // replica slots storage.keepers asks for (0: the head's keeper alone)
  std::size_t keeper_slots_empty = 0;
  std::uint64_t worker_restarts = 0;  // every node's, as last heard
  std::optional<double> since_worker_restart_s;  // since the registry last heard of one; nullopt: never
  double restart_window_s = 20;  // a restart this recent counts as restarting (cluster.lease_ms)
  std::optional<double> since_last_round_s;  // nullopt: no round committed yet
  double stall_after_s = 60;  // no round for this long while training is a stall
};

struct run_condition {
  std::string type;  // Training, Degraded, Restarting, Finished
  bool status = false;
  std::string reason;
  std::string message;
  bool operator==(const run_condition& o) const {
    return type == o.type && status == o.status && reason == o.reason && message == o.message;
  }
};

// The four conditions, in the order above.
std::vector<run_condition> run_conditions(const condition_facts& facts);

}  // namespace atl
