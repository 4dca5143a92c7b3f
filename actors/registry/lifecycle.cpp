// Each node's lifecycle applied (actors/registry/lifecycle.hpp; actors/decisions/
// membership.hpp decides the moves).
#include "actors/registry/lifecycle.hpp"

#include <caf/all.hpp>

#include "actors/registry/cursor.hpp"
#include "actors/registry/lease_proxy.hpp"
#include "actors/registry/phase.hpp"
#include "actors/registry/placements.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

// A node leaves the set that hosts anything: its proxy is stopped, and its ids (its
// coordinators above all) may move to another connection now.
void release_node(self_ptr self, node_view& n) {
  self->state.deps.net->forget_peer(node_actor_id(n.record.node_id));
  if (!n.proxy) return;
  self->demonitor(n.proxy);
  self->send_exit(n.proxy, caf::exit_reason::user_shutdown);
  n.proxy = nullptr;
}

}  // namespace

expected<member_state> transition(self_ptr self, std::uint32_t id, member_event event) {
  auto& st = self->state;
  auto& n = st.nodes.at(id);
  auto next = next_state(n.state, event);
  if (!next) return next;
  const bool ends = *next != n.state && (*next == member_state::left || *next == member_state::dead);
  if (*next != n.state) {
    n.state = *next;
    n.since = st.now();
  }
  if (!hosts_placed(n.state)) release_node(self, n);
  // Its workers tie no more data: their leased chunks settle (returned unless committed).
  if (ends) data_workers_gone(self, n.record.workers);
  return next;
}

void watch_lease(self_ptr self, std::uint32_t id) {
  auto& n = self->state.nodes.at(id);
  if (n.proxy) return;
  n.proxy = self->spawn(lease_proxy, node_actor_id(id), std::chrono::milliseconds(self->state.cfg.lease_ms),
                        std::chrono::milliseconds(self->state.cfg.confirm_ms));
  self->monitor(n.proxy);
}

void after_membership_change(self_ptr self) {
  auto& st = self->state;
  st.snap.epoch++;
  persist(self);
  publish_routes(self);
  replace_orphaned_coordinators(self);
  place_replica_keepers(self);
  publish_membership(self);
  update_run_phase(self);
}

void mark_synced_if_all_acked(self_ptr self, std::uint32_t node_id) {
  auto& st = self->state;
  auto node = st.nodes.find(node_id);
  if (node == st.nodes.end() || node->second.state != member_state::syncing) return;
  for (const auto& w : node->second.record.workers)
    if (st.workers[w].rounds_acked == 0) return;
  (void)transition(self, node_id, member_event::synced);  // syncing, checked above
}

status drain_node(self_ptr self, std::uint32_t id, const std::string& why) {
  auto& st = self->state;
  if (auto next = transition(self, id, member_event::drain); !next)
    return make_error(errc::not_ready, "leave: node " + std::to_string(id) + " is " + to_string(st.nodes.at(id).state));
  st.nodes.at(id).shutdown_sent = false;
  log_info("registry: node " + std::to_string(id) + " is draining (" + why + ")");
  after_membership_change(self);
  return {};
}

}  // namespace atl::registry_detail
