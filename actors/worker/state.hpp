#pragma once
// The worker's state (actors/worker/worker.hpp): its phase, model replica, fragment syncs and
// counters. Its own header so the step strategies (actors/worker/steps.hpp) read it
// without including the actor.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_clock.hpp>

#include "actors/decisions/contribution_weight.hpp"
#include "actors/decisions/fragment_sync.hpp"
#include "actors/decisions/warm_start.hpp"
#include "actors/worker/data_feed.hpp"
#include "actors/worker/done.hpp"
#include "actors/worker/replica.hpp"
#include "runtime/algorithm/codec.hpp"
#include "runtime/algorithm/fragment_schedule.hpp"
#include "runtime/algorithm/time_pacer.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/thread_layout.hpp"
#include "runtime/transport/transport.hpp"

namespace atl {

struct worker_config {
  std::string id;
  std::string cluster_id;
  replica_spec spec;
  run_config run;
  std::string registry = registry_id();
  // The thread layouts a CPU worker tries over its first steps (runtime/core/thread_layout.hpp);
  // empty: it keeps the threads its process set. apply_threads sets one on the calling
  // thread, which is the worker's own.
  std::vector<thread_layout> thread_layouts;
  std::function<void(const thread_layout&)> apply_threads;
  // Told the layout a trial kept, so that a restarted worker starts with it (no new trial).
  std::function<void(const thread_layout&)> keep_threads;
  // Told the final report when the worker finishes, for its node to send again after the
  // link to the head comes back (actors/worker/done.hpp).
  std::function<void(const worker_done_report&)> keep_done;
};

class step_strategy;  // actors/worker/steps.hpp

struct worker_state {
  enum class phase { syncing, training, blocked, finished };
  phase current = phase::syncing;
  worker_config cfg;
  codec_kind codec = codec_kind::fp32;
  std::unique_ptr<mailer> mail;
  std::unique_ptr<replica> model;
  std::unique_ptr<fragment_schedule> schedule;
  // diloco.sync_every_s: the schedule's step is a clock of training time (unset: it counts
  // inner steps). `step` below is the schedule's; `inner_steps` counts steps trained.
  std::optional<time_pacer> pacer;
  std::unique_ptr<step_strategy> steps;  // DiLoCo or ddp
  std::vector<fragment_sync> fragments;  // theta_global itself is kept by the replica
  // Per fragment, when its latest contribution was first handed to the transport: the
  // RoundAck says how long before the merge that was, so a round can be timed from the
  // last worker's send to the last worker's merge with each span on one clock.
  struct sent_contribution {
    std::uint64_t round = 0;
    std::chrono::steady_clock::time_point at;
    float weight = 1;  // in its round's average (diloco.weighting); every resend carries it
    std::vector<data::piece> pieces;  // the run's data it trained on (run.data_cursor); so do resends
  };
  std::vector<sent_contribution> contributed;
  // Per fragment, what the worker trained since it last synced it (contributed or adopted a
  // state): the weight of its next contribution.
  std::vector<trained_since_sync> trained;
  // Per fragment, its local values when it last contributed, until the merge that carries
  // the steps trained since (diloco.carry_overlap); empty otherwise.
  std::vector<std::vector<float>> at_contribution;
  std::vector<std::optional<worker_done_report::fragment_ack>> last_acks;  // per fragment: for WorkerDone
  encoded_values received_update;  // a low-bit result's change as it came (reused round to round)
  std::uint64_t epoch = 0;
  std::int64_t step = 0;
  std::int64_t inner_steps = 0;
  std::int64_t last_eval_step = -1;
  float last_loss = 0;
  std::uint64_t bytes_received = 0;
  std::int64_t tokens_since_report = 0;
  std::int64_t tokens_total = 0;
  double wait_seconds = 0;  // blocked on results
  std::optional<layout_trial> threads;  // set when cfg.thread_layouts is not empty
  // A joiner's warm start (actors/worker/warm.cpp): the live peers the coordinators named,
  // the transfer while it runs, and whether it was tried (once per worker).
  std::vector<std::string> donors;
  std::optional<warm_start> warm;
  std::chrono::steady_clock::time_point warm_asked_at;
  bool warm_tried = false;
  // A donor's side: the snapshot of its inner-optimizer state it lends, until the joiner
  // has its last chunk or another joiner asks for a new one.
  struct lent_snapshot {
    std::uint64_t id = 0;
    std::int64_t adam_step = 0;
    std::uint64_t digest = 0;
    std::vector<float> values;
  };
  std::optional<lent_snapshot> lent;
  // The run's data cursor (run.data_cursor): the leases, each step's units, the ties.
  std::optional<data_feed> data;
  std::uint64_t snapshots_lent = 0;
  std::chrono::steady_clock::time_point step_started;
  std::chrono::steady_clock::time_point report_time, started, blocked_since;
  // The actor system's clock: steady time in production, simulated under the
  // deterministic scheduler of the protocol fault tests.
  const caf::actor_clock* clock = nullptr;
  std::chrono::steady_clock::time_point now() const { return clock->now(); }
  worker_state();
  ~worker_state();  // step_strategy is complete in worker.cpp
  static inline const char* name = "worker";
};

}  // namespace atl
