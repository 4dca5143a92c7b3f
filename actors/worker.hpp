#pragma once
// Worker actor ("worker/N.K"): a model replica that trains alone and takes part in the
// outer rounds of every fragment. Spawned detached (it owns a thread: inner steps are
// blocking LibTorch work); one inner step per `step` message, so wire messages are
// handled between steps.
//
//   syncing --FragmentState for every fragment--> training
//   training --step t with a fragment due (t - offset_p) mod H == 0--> Contribution -> awaiting
//   awaiting --RoundResult (theta_global replaces the fragment: tau = 0, alpha = 0)--> training
//   awaiting --Refusal of its contribution--> syncing (re-fetches the committed state)
//   training --step == run.steps--> finished: WorkerDone, quit
//
// Rank 0 evaluates theta_global on the held-out data every run.eval_every steps and at
// the end. Pseudo-gradients are fp32: Delta = theta_global - theta_local.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/replica.hpp"
#include "runtime/algorithm/fragment_schedule.hpp"
#include "runtime/transport.hpp"

namespace atl {

struct worker_config {
  std::string id;
  std::string cluster_id;
  replica_spec spec;
  run_config run;
  std::string registry = "registry";
};

struct worker_state {
  enum class phase { syncing, training, awaiting, finished };
  phase current = phase::syncing;
  worker_config cfg;
  std::unique_ptr<mailer> mail;
  std::unique_ptr<replica> model;
  std::unique_ptr<fragment_schedule> schedule;
  std::vector<std::vector<float>> theta_global;  // per fragment
  std::vector<std::uint64_t> round;              // last applied round per fragment
  std::vector<bool> pending;                     // fragment waits for state or result
  std::uint64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t last_eval_step = -1;
  float last_loss = 0;
  std::uint64_t bytes_received = 0;
  std::int64_t tokens_since_report = 0;
  std::int64_t tokens_total = 0;
  std::chrono::steady_clock::time_point report_time, started;
  static inline const char* name = "worker";
};

const char* to_string(worker_state::phase p);

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory);

}  // namespace atl
