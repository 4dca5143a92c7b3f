// Applying the placement decisions (actors/placement.hpp): persisted before anyone hears
// of them, then sent, and sent again every tick until the placed actor runs.
#include "actors/placement.hpp"
#include "actors/registry_internal.hpp"
#include "runtime/actor_id.hpp"
#include "runtime/log.hpp"

namespace atl::registry_detail {

// (Re)sends PlaceCoordinator for every coordinator not yet confirmed: the first one can
// race the node's first message (the head learns the route to "node/N" from it).
void send_placements(self_ptr self) {
  auto& st = self->state;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    const auto& view = st.fragments[f];
    if (view.placed_on.empty() || view.confirmed) continue;
    wire::outgoing out;
    out.envelope.initPlaceCoordinator().setFragment(static_cast<std::uint32_t>(f));
    st.mail->send(view.placed_on, st.snap.epoch, out);
  }
}

void send_keeper_placement(self_ptr self) {
  auto& st = self->state;
  if (st.snap.replica_keeper.empty()) return;
  wire::outgoing out;
  auto place = out.envelope.initPlaceKeeper();
  place.setKeeper(keeper_id(replica_keeper_number));
  place.setSource(keeper_id(head_keeper_number));
  st.mail->send(st.snap.replica_keeper, st.snap.epoch, out);
}

// Placement decisions are persisted before anyone hears of them: a restarted head must not
// place a second coordinator.
void apply_coordinator_moves(self_ptr self, const std::vector<placement::coordinator_move>& moves, bool warn) {
  auto& st = self->state;
  for (const auto& m : moves) {
    st.fragments[m.fragment].placed_on = m.to;
    st.fragments[m.fragment].confirmed = false;
    if (warn) log_warn("registry: " + m.reason);
    else log_info("registry: " + m.reason);
  }
  if (!moves.empty()) {
    persist(self);
    publish_routes(self);  // before the coordinator can speak from its new host
  }
  send_placements(self);
}

// A coordinator lives on its node: when the node is gone, it is placed on a live one. The
// new coordinator reloads theta_global and the outer momentum from the keeper and announces
// the committed state, so workers waiting on the old one resync.
void replace_orphaned_coordinators(self_ptr self) {
  auto& st = self->state;
  if (st.phase != run_phase::training) return;
  std::vector<std::string> placements;
  for (const auto& f : st.fragments) placements.push_back(f.placed_on);
  apply_coordinator_moves(self, placement::replace_orphans(placements, node_facts(st)), true);
}

// Keeper replication: with a node that can keep (`atoll join --run-dir`), keeper/1 runs
// there and every commit needs its acknowledgement as well as the head's, so a round
// acknowledged as committed is on two machines. It catches up from the head's keeper.
void place_replica_keeper(self_ptr self) {
  auto& st = self->state;
  const auto choice =
      placement::choose_replica_keeper(st.snap.replica_keeper, node_facts(st), st.phase == run_phase::training);
  if (!choice.changed) return;
  st.snap.replica_keeper = choice.host;
  persist(self);
  if (choice.host.empty()) log_warn("registry: " + choice.reason);
  else log_info("registry: " + choice.reason);
  publish_routes(self);
  send_keeper_placement(self);
  publish_membership(self);  // coordinators commit to the new set of keepers
}

// Where tensors go: the nodes that host anything, with their data endpoints and keys, and
// the hosts of the coordinators and of the keeper replica.
route_table routes_of(const registry_state& st) {
  route_table table;
  table.epoch = st.snap.epoch;
  for (const auto& [id, n] : st.nodes)
    if (hosts_placed(n.state)) table.nodes[id] = {n.record.data_endpoint, n.record.public_key};
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (auto host = node_of(st.fragments[f].placed_on))
      table.placed[coordinator_id(static_cast<std::uint32_t>(f))] = *host;
  if (auto host = node_of(st.snap.replica_keeper)) table.placed[keeper_id(replica_keeper_number)] = *host;
  return table;
}

// The head's ingress checks senders with the new table at once; nodes hear it now and again
// every tick (a lost PeerTable costs at most a tick of relayed traffic).
void publish_routes(self_ptr self) {
  auto& st = self->state;
  auto table = routes_of(st);
  for (const auto& [id, _] : table.nodes) send_routes(self, table, id);
  if (st.deps.routes) st.deps.routes->set(std::move(table));
}

void send_routes(self_ptr self, const route_table& table, std::uint32_t node) {
  auto& st = self->state;
  wire::outgoing out;
  write_peer_table(table, out.envelope.initPeerTable());
  st.mail->send(node_actor_id(node), st.snap.epoch, out);
}

}  // namespace atl::registry_detail
