#pragma once
// The lifecycles the registry keeps, apart from all I/O: one per node, one for the run.
//
// Node (member_state):
//
//   (Hello) --> joining --heartbeat--> syncing --every worker acked a round--> active
//                  |                      |                                      |
//                  +----------------------+------------- atoll leave ------------+--> draining
//   joining | syncing | active --Goodbye--> left          draining --Goodbye | lease--> left
//   joining | syncing | active --lease ran out--> dead (work left) | left (all its workers done)
//   left | dead --Hello with its node id--> joining      left | dead --heartbeat--> refused
//
// Joining, syncing and active nodes take part: their workers are in the Membership, and
// coordinators and keepers may be placed on them. A draining node still hosts what was
// placed on it until its Goodbye, but its workers no longer take part.
//
// Run (run_phase):   waiting --min_workers registered--> training
//                    training --no live node has a worker still training--> finished
//
// Every refused transition is a typed error naming the state; the state stays as it was.
// On disk (storage/registry_store.hpp) the states are the stable strings of to_string.
#include <string>
#include <string_view>

#include "runtime/core/expected.hpp"

namespace atl {

enum class member_state { joining, syncing, active, draining, left, dead };

enum class member_event {
  heartbeat,  // renews the lease; the first one after the Welcome ends joining
  synced,  // every worker of the node merged a round result
  drain,  // atoll leave
  goodbye,  // the node stops (SIGTERM, atoll down, its work is done)
  lease_expired,  // no heartbeat for cluster.lease_ms, work left
  lease_expired_done,  // no heartbeat for cluster.lease_ms, every worker finished
  rejoin,  // a Hello naming this node's id (a head restart, a lease that ran out)
};

// The state after `event`, or a typed refusal (stale_epoch for a gone node's heartbeat,
// not_ready for anything else the state does not allow).
expected<member_state> next_state(member_state from, member_event event);

// Its workers take part in rounds; coordinators and keepers may be placed on it.
bool takes_part(member_state s);
// What was placed on it still runs there (a draining node keeps it until its Goodbye).
bool hosts_placed(member_state s);

const char* to_string(member_state s);
const char* to_string(member_event e);
// On disk a node that takes part is "active" (the format predates joining and syncing); it
// comes back as joining, since a restarted head has heard from no node yet. Unknown text
// is a storage_failure.
const char* stored_member_state(member_state s);
expected<member_state> parse_stored_member_state(std::string_view text);

enum class run_phase { waiting, training, finished };
const char* to_string(run_phase p);
expected<run_phase> parse_run_phase(std::string_view text);
// waiting -> training -> finished; anything else is refused (unexpected_message).
expected<run_phase> next_phase(run_phase from, run_phase to);

}  // namespace atl
