#pragma once
// A fragment's committed state coming in (actors/worker/state_intake.cpp): a StateRequest to
// f's coordinator; a FragmentState adopted whole or fetched in chunks from its keepers; a
// ChunkReply; the fetch's next chunk from its current keeper; the next keeper (or the
// coordinator again, once every keeper failed).
#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/worker/steps.hpp"

namespace atl {

void request_state(worker_self self, std::size_t f);
// True when the state was adopted and the worker may go on (the shell then resumes it, if
// every fragment is synced); false while it is fetched in chunks, or when the worker asked
// again because it is past a later round (skip_rounds_started_past).
bool adopt_state(worker_self self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round);
bool on_chunk(worker_self self, const wire::message_ptr& msg);  // true as adopt_state
void request_chunk(worker_self self, std::size_t f);
void fetch_elsewhere(worker_self self, std::size_t f, const std::string& why);
// Fragment f is synced at a round older than the worker's step, which is past the sync
// points of the rounds after it (a joiner whose other slice of the fragment was a round
// ahead, or a state answered outside a round): those rounds would wait for contributions
// that never come. The worker says it skips them, asking for the state again
// (StateRequest.skipsRound: the last it is past; at most once per state_retry). True if
// it asked.
bool skip_rounds_started_past(worker_self self, std::size_t f);

}  // namespace atl
