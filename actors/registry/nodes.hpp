#pragma once
// The registry's handlers of a node's messages and lifecycle events: Hello (and the
// admission of new nodes), Heartbeat, a closed connection, a lease that ran out, Goodbye,
// a node's own LeaveRequest, a hand-over's KeeperReady, and a request
// for the whole route table.
#include <chrono>
#include <cstddef>
#include <string>

#include <caf/fwd.hpp>

#include "actors/registry/outbox.hpp"
#include "runtime/etcd/etcd_client.hpp"

namespace atl::registry_detail {

// New nodes are admitted this long after the first Hello not yet admitted, together: a
// thousand nodes starting within a second are tens of epochs and writes, not a thousand
// (each a synced write that kept the registry seconds behind its mailbox).
constexpr std::chrono::milliseconds admission_gap{50};
// At most this many at once (the rest in the next admission, at once): their members are
// one write each in the epoch's save, and on etcd a save is one transaction, which takes
// etcd_max_txn_ops (the registry's own records and the members that left beside them).
constexpr std::size_t max_admitted_at_once = 100;
static_assert(max_admitted_at_once + 16 <= etcd_max_txn_ops, "an admission's save must fit one etcd transaction");

void on_hello(self_ptr self, const wire::message_ptr& msg);
void admit_new_nodes(self_ptr self);  // admit_atom: the nodes that said Hello since the last admission
void on_heartbeat(self_ptr self, const wire::message_ptr& msg);
void on_proxy_down(self_ptr self, const caf::down_msg& down);
void on_link_lost(self_ptr self, const std::string& peer);
void on_goodbye(self_ptr self, const wire::message_ptr& msg);
// A node's own LeaveRequest (SIGTERM while it hosts a keeper replica): as `atoll leave`.
void on_leave_request(self_ptr self, const wire::message_ptr& msg);
// A hand-over's incoming replica says which rounds it holds.
void on_keeper_ready(self_ptr self, const wire::message_ptr& msg);
// A node whose route deltas left a gap asks for the whole table.
void on_peer_table_request(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::registry_detail
