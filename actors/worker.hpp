#pragma once
// Worker actor ("worker/N.K"): a model replica that trains alone and takes part in the
// outer rounds of every fragment. Spawned detached (it owns a thread: inner steps are
// blocking LibTorch work); one inner step per `step` message, so wire messages are
// handled between steps.
//
// DiLoCo / Streaming DiLoCo (run.mode = diloco):
//   syncing --FragmentState for every fragment--> training (StateRequests repeat every 2 s
//           until answered: coordinators are placed when the run starts). A large
//           fragment's FragmentState is a header: its values come in chunks from the
//           keepers it names (actors/state_fetch.hpp), moving to the next keeper when one
//           is silent for 2 s or cannot serve, resuming at the first missing value.
//   training, after step t where fragment p is due ((t - offset_p) mod H == 0):
//       Contribution(encode(theta_global_p - theta_local_p [+ residual])) to coord/p, for
//       the round the schedule gives step t (so every worker contributes round r of p at
//       the same step, whatever it lost; a base older than r - 1 makes a stale but valid
//       contribution, and merging the result brings the worker back to the global state);
//       RoundAck(digest of the result) goes to the registry
//       the result must be merged before step t + tau trains
//   training, a result due and not yet here --> blocked (the wait is measured)
//   blocked --RoundResult--> training
//   merge: theta_local_p = alpha * theta_local_p + (1 - alpha) * theta_global_p
//          (tau = 0, alpha = 0 is plain DiLoCo: the fragment is replaced)
//   blocked, no result within diloco.result_timeout_ms --> the same contribution again
//   blocked --Refusal(stale_epoch) of its contribution--> the same contribution again,
//           stamped with the round's epoch from the refusal (the round opened in a newer epoch)
//   any --resend (the node's link to the head came back)--> the pending contribution again
//           (duplicate: it counted; wrong_round: its result was lost, resync)
//   blocked --any other Refusal of its contribution--> training, re-fetching the committed
//           state (until it arrives the fragment is not contributed)
//   Epochs are per fragment: each coordinator opens its rounds in its own epoch.
//   training --step == run.steps and every result merged--> finished: WorkerDone, quit
//
// Data-parallel baseline (run.mode = ddp): every step the worker sends its gradients,
// waits for the average, then takes its AdamW step: same model, data order and optimizer.
//
// Rank 0 evaluates theta_global on the held-out data every run.eval_every steps and at
// the end.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/replica.hpp"
#include "actors/state_fetch.hpp"
#include "runtime/algorithm/codec.hpp"
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

// One fragment as the worker sees it.
struct fragment_sync {
  // theta_global itself is kept by the replica (replica::adopt_global / merge_global),
  // on the device the replica trains on.
  std::uint64_t round = 0;          // last merged round
  std::uint64_t epoch = 0;          // epoch of the coordinator's open round, as last heard from it
  bool awaiting_state = false;      // StateRequest sent, FragmentState not yet here
  bool awaiting_result = false;     // Contribution sent, result not merged yet
  std::int64_t merge_at = 0;        // the result is merged before this step trains
  std::chrono::steady_clock::time_point sent_at;  // of the awaited contribution
  // The awaited contribution, kept until its result arrives: a coordinator that refuses it
  // as stale_epoch (its round opened in a newer epoch) or reopens its round after a
  // re-placement gets the same bytes again, stamped with the round's epoch.
  encoded_values pending;
  std::uint64_t pending_round = 0;  // the round it is for
  std::uint64_t pending_seq = 0;    // envelope seq of its last sending
  bool result_ready = false;
  std::vector<float> result;        // the released values of round result_round
  std::uint64_t result_round = 0;
  state_fetch fetch;                // a large fragment's state arriving in chunks from keepers
  std::uint64_t fetch_epoch = 0;    // of the FragmentState that started it
  std::chrono::steady_clock::time_point chunk_asked_at;
};

struct worker_state {
  enum class phase { syncing, training, blocked, finished };
  phase current = phase::syncing;
  worker_config cfg;
  codec_kind codec = codec_kind::fp32;
  std::unique_ptr<mailer> mail;
  std::unique_ptr<replica> model;
  std::unique_ptr<fragment_schedule> schedule;
  std::vector<fragment_sync> fragments;
  std::uint64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t last_eval_step = -1;
  float last_loss = 0;
  std::uint64_t bytes_received = 0;
  std::int64_t tokens_since_report = 0;
  std::int64_t tokens_total = 0;
  double wait_seconds = 0;  // blocked on results
  std::chrono::steady_clock::time_point report_time, started, blocked_since;
  // The actor system's clock: steady time in production, simulated under the
  // deterministic scheduler of the protocol fault tests.
  const caf::actor_clock* clock = nullptr;
  std::chrono::steady_clock::time_point now() const { return clock->now(); }
  static inline const char* name = "worker";
};

const char* to_string(worker_state::phase p);

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory);

}  // namespace atl
