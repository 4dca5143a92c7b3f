#pragma once
// Each node's lifecycle (actors/decisions/membership.hpp: joining -> syncing -> active ->
// draining -> left | dead) applied to the registry's state: the move itself, the lease
// that watches the node, and what a change of who takes part sets off.
#include <cstdint>
#include <string>

#include "actors/decisions/membership.hpp"
#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

// Node `id` through `event`; a typed refusal, leaving it as it was, if its state does not
// allow it. A node that no longer hosts anything loses its lease proxy and its route; the
// workers of a node that ends (left, dead) tie no more data.
expected<member_state> transition(self_ptr self, std::uint32_t id, member_event event);
// A live node is represented here by a lease proxy (actors/registry/lease_proxy.hpp):
// heartbeats renew it, and its down message is how the registry learns the lease ran out.
void watch_lease(self_ptr self, std::uint32_t id);
// Every change of who takes part: a new epoch, persisted and published, coordinators of
// gone nodes re-placed, and the run finished if only finished workers are left.
void after_membership_change(self_ptr self);
// Node `id` drains (`atoll leave`, or its own LeaveRequest): its workers stop taking part
// now. It is told to stop (and says goodbye) at once, or, if it hosts a keeper replica,
// once the replica is handed over (advance_handover, reached through the placement of the
// replica keepers). not_ready if its state does not allow it.
status drain_node(self_ptr self, std::uint32_t id, const std::string& why);
// syncing -> active once each of the node's workers acknowledged a round.
void mark_synced_if_all_acked(self_ptr self, std::uint32_t node_id);

}  // namespace atl::registry_detail
