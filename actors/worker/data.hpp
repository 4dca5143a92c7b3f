#pragma once
// The run's data cursor (run.data_cursor; actors/worker/data.cpp, actors/worker/data_feed.hpp).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "actors/worker/steps.hpp"

namespace atl {

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

}  // namespace atl
