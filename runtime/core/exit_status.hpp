#pragma once
// What an `atoll up` or `atoll join` process's exit status means, for whoever restarts it:
// Kubernetes (deploy/kubernetes: a Job's podFailurePolicy, a JobSet's failurePolicy), Slurm,
// a shell. One table, docs/operations.md "Exit codes":
//
//   0   finished     the run finished, or `atoll down` / a head stopped: nothing to restart
//   1   retriable    a failure a restart may cure: the head unreachable past --wait-for-head,
//                    a worker that failed too often, a lost link, an I/O error
//   2   config       bad flags, config, keys, model or data files: a restart fails alike
//   3   lost lead    a head's registry stopped because it could not save its state (its lead
//                    ended): another head carries on. Heads that fail over on etcd stand by
//                    again instead of exiting with it; a restarted head stands by too
//   4   refused      the run refused this node: its model differs from the run's, another
//                    cluster's or another version's messages: a restart is refused alike
//   143 drained      SIGTERM: the node left the run (its keeper replica handed over first);
//                    not a failure, and not a finish (128 + SIGTERM, as a shell reports it)
#include "runtime/core/error.hpp"

namespace atl {

enum class exit_status : int {
  finished = 0,
  retriable = 1,
  config = 2,
  lost_lead = 3,
  refused = 4,
  drained = 143,
};

constexpr int code_of(exit_status s) { return static_cast<int>(s); }

// Why a process gave up (its error's code) as its exit status: a configuration the process
// read itself is `config`; one the run refused is `refused`; anything else `retriable`.
exit_status exit_status_for(errc why);

// Its stable name ("drained"), as docs/operations.md and the manifests' comments say it.
const char* to_string(exit_status s);

}  // namespace atl
