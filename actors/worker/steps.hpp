#pragma once
// The worker's helpers (actors/worker/steps.cpp), the bottom of its files but for its state
// (actors/worker/worker.hpp draws them): contributions and acknowledgements sent, progress
// and held-out loss reported, the wait for a result begun and ended, the worker finished.
// They call nothing above them.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker/state.hpp"
#include "actors/worker/strategy.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

// How long a worker waits for a FragmentState, or a keeper for a chunk, before asking again.
constexpr auto state_retry = std::chrono::seconds(2);

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
// NaN or infinity in what a worker would send: the replica diverged; the supervisor
// restarts it.
void quit_on_encode_error(worker_self self, std::size_t f, const status& err);

}  // namespace atl
