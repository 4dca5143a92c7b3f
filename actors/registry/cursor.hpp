#pragma once
// The run's data cursor at the head (actors/decisions/data_cursor.hpp; docs/design.md §1,
// "Every sample once"), as the registry changes it: restored with the snapshot, tied and
// committed as rounds report, settled as workers go and the run ends. After each change
// the cursor is saved with the registry's snapshot, in its stored form
// (actors/shared/cursor_record.hpp), before anyone hears of the change.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

// From the snapshot of a restarted head; a damaged one is kept out (st.data_damaged).
void restore_data_cursor(self_ptr self);
// Into the snapshot, then synced: a lease is durable before the worker hears of it. False
// when the store refused it.
bool save_cursor(self_ptr self);
// Every piece of a worker's contribution to (fragment, round), or none: a refused piece
// leaves the cursor as it was before the first.
status tie_pieces(self_ptr self, const std::string& worker, std::uint32_t fragment, std::uint64_t round,
                  capnp::List<schema::DataPiece>::Reader pieces);
// A RoundReport's commit (msg): the data pieces it carries tied, then the contributions of
// `taken` on time and of `late` a round late consumed; nothing if the cursor applied it
// before (a report sent again). False when the cursor could not be saved.
bool data_committed(self_ptr self, const wire::message& msg, const std::vector<std::string>& taken,
                    const std::vector<std::string>& late);
// Workers of a node that left or died, called just before the epoch moves (transition,
// then after_membership_change).
void data_workers_gone(self_ptr self, const std::vector<std::string>& workers);
// The run finished: chunks of gone workers that waited for commits settle.
void data_run_finished(self_ptr self);

}  // namespace atl::registry_detail
