#pragma once
// How a worker steps: DiLoCo (actors/worker/diloco.cpp) or the synchronous data-parallel
// baseline (actors/worker/ddp.cpp), and the worker's helpers both use. Shared by the
// worker's own files; no other actor includes this.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/worker/state.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

// How long a worker waits for a FragmentState, or a keeper for a chunk, before asking again.
constexpr auto state_retry = std::chrono::seconds(2);

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

// The helpers, in actors/worker/steps.cpp.
void report_progress(worker_self self);
void maybe_evaluate(worker_self self);
void report_held_out(worker_self self, float loss);  // an EvalReport at the current step
void finish(worker_self self);  // WorkerDone, quit
// Around each inner step of a worker whose thread layout is on trial
// (runtime/core/thread_layout.hpp): the layout the step runs with, and its time.
void begin_inner_step(worker_state& st);
void end_inner_step(worker_state& st);
// What Progress says of the layout: "1x2", "trying 2x1", or "" (no trial: a GPU worker).
std::string thread_layout_report(const worker_state& st);
void block(worker_state& st);
void unblock(worker_self self);  // blocked -> training, the wait measured
// (Re)sends fragment f's pending contribution, stamped with the fragment's epoch.
void send_pending(worker_self self, std::size_t f);
// Fragment f's encoded contribution for `round`, kept until its result arrives.
// `pieces`: the run's data it trained on (run.data_cursor), carried by every resend.
void send_contribution(worker_self self, std::size_t f, std::uint64_t round, encoded_values enc, float weight = 1.0f,
                       std::vector<data::piece> pieces = {});
// Tells the registry which round of fragment f this worker now holds (RoundAck): a result
// it merges, or a state it adopted, with the digest of its theta_global.
void acknowledge_round(worker_self self, std::size_t f, std::uint64_t round, std::uint64_t digest, bool adopted);
// Every fragment has its state (and a joiner its inner-optimizer state): a joiner starts
// training, a worker held at a sync point goes on (actors/worker/worker.cpp).
void resume_if_synced(worker_self self);

// A fragment's committed state coming in (actors/worker/state_intake.cpp): a StateRequest to
// f's coordinator; a FragmentState adopted whole or fetched in chunks from its keepers; a
// ChunkReply; the fetch's next chunk from its current keeper; the next keeper (or the
// coordinator again, once every keeper failed).
void request_state(worker_self self, std::size_t f);
void adopt_state(worker_self self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round);
void on_chunk(worker_self self, const wire::message_ptr& msg);
void request_chunk(worker_self self, std::size_t f);
void fetch_elsewhere(worker_self self, std::size_t f, const std::string& why);
// Fragment f is synced at a round older than the worker's step, which is past the sync
// points of the rounds after it (a joiner whose other slice of the fragment was a round
// ahead, or a state answered outside a round): those rounds would wait for contributions
// that never come. The worker says it skips them, asking for the state again
// (StateRequest.skipsRound: the last it is past; at most once per state_retry). True if
// it asked.
bool skip_rounds_started_past(worker_self self, std::size_t f);

// Warm start (actors/worker/warm.cpp, actors/decisions/warm_start.hpp). A joiner asks the donors the
// coordinators named for their inner-optimizer state; false when there is nothing to wait
// for (it starts cold, or run.warm_start is off). Its replies, and a donor's requests:
bool start_warm(worker_self self);
void on_inner_state_reply(worker_self self, const wire::message_ptr& msg);
void lend_inner_state(worker_self self, const wire::message& msg);
void warm_tick(worker_self self, std::chrono::steady_clock::duration patience);

// The run's data cursor (run.data_cursor; actors/worker/data.cpp, actors/worker/data_feed.hpp).
// Set up when the replica's task has units, else a warning and the shard's sampling.
void start_data_feed(worker_self self);
// The next step's units into the replica; false (a lease asked for) when none wait.
bool feed_next_step(worker_self self);
// Fragment f's contribution to `round` at this step: the positions of the run's data it
// covers (none without the cursor).
// Logged at debug level as "ID: data of unit F round R: EPOCH:CHUNK:BEGIN-END ...".
std::vector<data::piece> contribution_pieces(worker_self self, std::size_t f, std::uint64_t round);
void on_data_lease(worker_self self, const wire::message_ptr& msg);
// A refusal of the registry's: a lease asked for is asked again at the next tick.
// invalid_config (this worker's data is not the run's: another file, batch or H) stops the
// worker with the registry's reason, as a restart would meet it again.
void data_refused(worker_self self, errc code, const std::string& why);
void data_tick(worker_self self);  // a lease wanted and none asked for: ask
// Every epoch of the run's data is leased and trained: the worker's steps are over.
bool data_exhausted(const worker_state& st);

// NaN or infinity in what a worker would send: the replica diverged; the supervisor
// restarts it.
void quit_on_encode_error(worker_self self, std::size_t f, const status& err);

}  // namespace atl
