#pragma once
// What the registry's own files share; no other actor includes this.
//   registry.cpp    the actor: dispatch, run phase (actors/decisions/run_phase.hpp),
//                   persistence, Membership, control
//   nodes.cpp       each node's lifecycle (actors/decisions/membership.hpp)
//   placements.cpp  placement decisions applied (actors/decisions/placement.hpp)
//   reports.cpp     worker and coordinator reports -> views and metrics
//   data.cpp        the run's data cursor: leases, ties, commits, workers gone
//   queries.hpp     pure queries over registry_state, which the views share
#include <chrono>
#include <string>
#include <vector>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/decisions/placement.hpp"
#include "actors/registry/queries.hpp"
#include "actors/registry/registry.hpp"
#include "runtime/head/etcd_client.hpp"
#include "runtime/transport/route_delta.hpp"

namespace atl::registry_detail {

using self_ptr = caf::stateful_actor<registry_state>*;

// The snapshot from the state, synced to RocksDB: before anyone hears of a change. False
// when the store refused it (logged; a fenced store also stops the registry).
bool persist(self_ptr self);
// The Membership to every placed coordinator: at once, or within route_publish_gap of the
// last one with the changes since (send_membership_now, when it is due).
void publish_membership(self_ptr self);
void send_membership_now(self_ptr self);
// The run's phase moved as actors/decisions/run_phase.hpp decides from what the registry
// knows now: waiting -> training once run.min_workers take part (coordinators and keepers
// placed); training -> finished once no live worker trains and the merged rounds are
// reported (every node still there is then told to stop: run_finished_reason). Called
// after anything that may change it.
void update_run_phase(self_ptr self);
inline constexpr const char* run_finished_reason = "run finished";
// Shutdown(reason) to node/N; to every node that takes part.
void send_shutdown(self_ptr self, std::uint32_t node, const std::string& reason);
void stop_every_node(self_ptr self, const std::string& reason);
// syncing -> active once each of the node's workers acknowledged a round.
void mark_synced_if_all_acked(self_ptr self, std::uint32_t node_id);

// registry_placements.cpp
void send_placements(self_ptr self);
void send_keeper_placement(self_ptr self);
void apply_coordinator_moves(self_ptr self, const std::vector<placement::coordinator_move>& moves, bool warn);
void replace_orphaned_coordinators(self_ptr self);
void place_replica_keepers(self_ptr self);
// The next steps of a replica's hand-over off a draining node (placement::decide_handover),
// and Shutdown to the draining nodes that may go.
void advance_handover(self_ptr self);
route_table routes_of(const registry_state& st);
// Changes closer together than this go to the nodes as one delta (placements excepted).
constexpr std::chrono::milliseconds route_publish_gap{100};
// New nodes are admitted this long after the first Hello not yet admitted, together: a
// thousand nodes starting within a second are tens of epochs and writes, not a thousand
// (each a synced write that kept the registry seconds behind its mailbox).
constexpr std::chrono::milliseconds admission_gap{50};
// At most this many at once (the rest in the next admission, at once): their members are
// one write each in the epoch's save, and on etcd a save is one transaction, which takes
// etcd_max_txn_ops (the registry's own records and the members that left beside them).
constexpr std::size_t max_admitted_at_once = 100;
static_assert(max_admitted_at_once + 16 <= etcd_max_txn_ops, "an admission's save must fit one etcd transaction");
void admit_new_nodes(self_ptr self);
void publish_routes(self_ptr self);
void send_routes_to_nodes(self_ptr self, route_table table);  // what publish_routes holds back, now
void send_whole_routes(self_ptr self, std::uint32_t node);  // the table last published
// A heartbeat said node `node` holds the table of `epoch` with `digest`: a version check
// if that is not the one published (the node then asks for the whole table), else nothing.
void check_routes_held(self_ptr self, std::uint32_t node, std::uint64_t epoch, std::uint64_t digest);
void send_route_delta(self_ptr self, const route_delta& d, std::uint32_t node);
void on_peer_table_request(self_ptr self, const wire::message_ptr& msg);

// registry_nodes.cpp
// Node `id` through `event`; a typed refusal, leaving it as it was, if its state does not
// allow it. A node that no longer hosts anything loses its lease proxy and its route.
expected<member_state> transition(self_ptr self, std::uint32_t id, member_event event);
void watch_lease(self_ptr self, std::uint32_t id);
void on_hello(self_ptr self, const wire::message_ptr& msg);
void on_heartbeat(self_ptr self, const wire::message_ptr& msg);
void on_proxy_down(self_ptr self, const caf::down_msg& down);
void on_link_lost(self_ptr self, const std::string& peer);
void on_goodbye(self_ptr self, const wire::message_ptr& msg);
// `atoll leave N`: the reply body, or an error naming the problem.
expected<nlohmann::json> start_leave(self_ptr self, const std::string& argument);
// A node's own LeaveRequest (SIGTERM while it hosts a keeper replica): as `atoll leave`.
void on_leave_request(self_ptr self, const wire::message_ptr& msg);
// A hand-over's incoming replica says which rounds it holds.
void on_keeper_ready(self_ptr self, const wire::message_ptr& msg);

// data.cpp: the run's data cursor (actors/decisions/data_cursor.hpp)
// From the snapshot of a restarted head; a damaged one is kept out (st.data_damaged).
void restore_data_cursor(self_ptr self);
void on_data_lease_request(self_ptr self, const wire::message_ptr& msg);
void on_data_tie(self_ptr self, const wire::message_ptr& msg);
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

// registry_reports.cpp
// Progress, EvalReport, WorkerDone and RoundAck of workers; RoundReport of coordinators.
void on_worker_report(self_ptr self, const wire::message_ptr& msg);
void on_round_report(self_ptr self, const wire::message_ptr& msg);
void on_round_progress(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::registry_detail
