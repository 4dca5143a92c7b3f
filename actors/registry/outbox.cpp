// The registry's outputs (actors/registry/outbox.hpp): the snapshot persisted, the
// Membership and the route tables published, placements and Shutdown sent.
#include "actors/registry/outbox.hpp"

#include <algorithm>
#include <optional>

#include <caf/all.hpp>

#include "actors/decisions/quorum.hpp"
#include "actors/registry/queries.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

void send_route_delta(self_ptr self, const route_delta& d, std::uint32_t node) {
  auto& st = self->state;
  wire::outgoing out;
  write_route_delta(d, out.envelope.initPeerTable());
  st.mail->send(node_actor_id(node), st.snap.epoch, out);
}

}  // namespace

membership_view membership_of(registry_state& st) {
  membership_view view;
  view.epoch = st.snap.epoch;
  view.workers = live_workers(st);
  view.workers.erase(std::remove_if(view.workers.begin(), view.workers.end(),
                                    [&](const std::string& w) { return st.workers[w].done; }),
                     view.workers.end());
  std::sort(view.workers.begin(), view.workers.end());
  view.quorum = static_cast<std::uint32_t>(quorum::required_participants(static_cast<std::size_t>(st.cfg.min_workers),
                                                                         view.workers.size(), any_worker_done(st)));
  // Every group's commit keepers, in group order; a coordinator takes its unit's group's
  // (keepers_of_unit).
  for (std::size_t g = 0; g < keeper_groups(st); ++g) {
    const auto keepers = commit_keepers_of(st, g);
    view.keepers.insert(view.keepers.end(), keepers.begin(), keepers.end());
    if (keeper_groups(st) > 1) view.keeper_group_sizes.push_back(static_cast<std::uint32_t>(keepers.size()));
  }
  return view;
}

void send_membership(self_ptr self, const std::string& to, const membership_delta& d) {
  auto& st = self->state;
  wire::outgoing out;
  write_membership(d, out.envelope.initMembership());
  st.mail->send(to, st.snap.epoch, out);
}

bool persist(self_ptr self) {
  auto& st = self->state;
  st.snap.run_state = to_string(st.phase);
  st.snap.placements.clear();
  for (const auto& f : st.fragments) st.snap.placements.push_back(f.placed_on);
  st.snap.finished.clear();
  for (const auto& [id, w] : st.workers)
    if (w.done) st.snap.finished.push_back(id);
  st.snap.members.clear();
  for (auto& [_, n] : st.nodes) {
    n.record.state = stored_member_state(n.state);
    st.snap.members.push_back(n.record);
  }
  auto err = st.deps.store->save(st.snap);
  if (!err) return true;
  if (!st.deps.stop_when_unsaved) {
    log_error("registry: cannot persist membership: " + err.describe());
    return false;
  }
  log_error("registry: cannot persist membership (" + err.describe() + "): this head stops directing");
  st.mail->silence();
  self->quit(caf::make_error(caf::sec::runtime_error, "registry state unsaved: " + err.describe()));
  return false;
}

// Changes closer together than route_publish_gap reach the coordinators as one Membership,
// as PeerTables reach the nodes: at a thousand nodes a Membership lists a thousand workers,
// and a burst of joins is one of them to each coordinator, not one per join.
void publish_membership(self_ptr self) {
  auto& st = self->state;
  switch (st.membership_sending.on_change(st.now(), route_publish_gap)) {
    case coalesced_send::verdict::send_now: return send_membership_now(self);
    case coalesced_send::verdict::schedule:
      return self->delayed_send(self, st.membership_sending.wait(), members_atom::value);
    case coalesced_send::verdict::already_due: return;
  }
}

void send_membership_now(self_ptr self) {
  auto& st = self->state;
  st.membership_sending.sent(st.now());
  auto now = membership_of(st);
  // What changed since the last published, the same to every coordinator; a coordinator
  // placed since gets the whole one (one that holds another Membership all the same, a
  // delta lost, asks for the whole). Nothing to one that holds it when nothing changed: its
  // RoundProgress names what it holds (check_membership_held).
  const bool unchanged = st.published_members && *st.published_members == now;
  std::optional<membership_delta> change, whole;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& unit = st.fragments[f];
    if (unit.placed_on.empty()) continue;
    const bool delta = unit.holds_membership && st.published_members;
    if (delta && unchanged) continue;
    auto& d = delta ? change : whole;
    if (!d) d = delta ? diff_membership(*st.published_members, now) : whole_membership(now);
    send_membership(self, coordinator_id(static_cast<std::uint32_t>(f)), *d);
    unit.holds_membership = true;
  }
  st.published_members_digest = members_digest(now);
  st.published_members = std::move(now);
}

void check_membership_held(self_ptr self, std::uint32_t unit, std::uint64_t epoch, std::uint64_t digest) {
  auto& st = self->state;
  if (!st.published_members || unit >= st.fragments.size() || !st.fragments[unit].holds_membership) return;
  if (epoch == st.published_members->epoch && digest == st.published_members_digest) return;
  send_membership(self, coordinator_id(unit), diff_membership(*st.published_members, *st.published_members));
}

void send_shutdown(self_ptr self, std::uint32_t node, const std::string& reason) {
  auto& st = self->state;
  wire::outgoing bye;
  bye.envelope.initShutdown().setReason(reason);
  st.mail->send(node_actor_id(node), st.snap.epoch, bye);
}

void stop_every_node(self_ptr self, const std::string& reason) {
  for (const auto& [id, n] : self->state.nodes)
    if (hosts_placed(n.state)) send_shutdown(self, id, reason);  // a draining node may be held
}

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
  for (const auto& r : placed_replicas(st)) {
    const auto id = keeper_id(r.number);
    // Confirmed where it is placed: nothing to ask, unless it is a hand-over's incoming
    // replica the hand-over still waits on (each repeat asks whether it caught up).
    const auto confirmed = st.keepers_confirmed.find(id);
    const auto pending = pending_handover(st, r.group);
    const bool awaited = pending && pending->incoming.number == r.number && !st.handovers[r.group].incoming_ready;
    if (confirmed != st.keepers_confirmed.end() && confirmed->second == r.host && !awaited) continue;
    auto source = st.keeper_sources.find(id);
    wire::outgoing out;
    auto place = out.envelope.initPlaceKeeper();
    place.setKeeper(id);
    place.setSource(source == st.keeper_sources.end() ? keeper_id(head_keeper_number) : source->second);
    if (keeper_groups(st) > 1) {  // one group keeps every unit: nothing to list
      const auto units = placement::units_of_group(r.group, keeper_groups(st), st.fragments.size());
      auto list = place.initUnits(static_cast<unsigned>(units.size()));
      for (unsigned i = 0; i < units.size(); ++i) list.set(i, units[i]);
    }
    st.mail->send(r.host, st.snap.epoch, out);
  }
}

void send_keeper_drops(self_ptr self) {
  auto& st = self->state;
  for (auto it = st.dropping.begin(); it != st.dropping.end();) {
    auto& [id, drop] = *it;
    const auto node = node_of(drop.host);
    if (drop.sends_left <= 0 || !node || !st.nodes.count(*node) || !hosts_placed(st.nodes.at(*node).state)) {
      it = st.dropping.erase(it);
      continue;
    }
    --drop.sends_left;
    st.keepers_confirmed.erase(id);
    wire::outgoing out;
    out.envelope.initDropKeeper().setKeeper(id);
    st.mail->send(drop.host, st.snap.epoch, out);
    ++it;
  }
}

// Where tensors go: the nodes that host anything, with their data endpoints and keys, and
// the hosts of the coordinators and of the keeper replicas.
route_table routes_of(const registry_state& st) {
  route_table table;
  table.epoch = st.snap.epoch;
  for (const auto& [id, n] : st.nodes)
    if (hosts_placed(n.state)) table.nodes[id] = {n.record.data_endpoint, n.record.public_key};
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (auto host = node_of(st.fragments[f].placed_on))
      table.placed[coordinator_id(static_cast<std::uint32_t>(f))] = *host;
  for (const auto& r : placed_replicas(st))
    if (auto node = node_of(r.host)) table.placed[keeper_id(r.number)] = *node;
  return table;
}

// The head's ingress checks senders with the new table at once. Nodes hear what changed
// since the table they were last sent, and a node new to the table hears the whole table.
// Each heartbeat names the table its node holds; a node whose table is not the one
// published gets a version check, with which it asks for the whole table (route_delta.hpp):
// a lost PeerTable costs at most a heartbeat of relayed traffic, a node that is current
// hears nothing, and the bytes follow the changes, not the size of the cluster. Each tick
// publishes what changed without being published (nothing, mostly).
// Placements go out at once, never held back: the registry sends PlaceCoordinator right
// after, and a coordinator placed anew must be found at its new host, not at the old one
// (a message sent there is lost, and its worker waits out diloco.result_timeout_ms).
void publish_routes(self_ptr self) {
  auto& st = self->state;
  auto table = routes_of(st);
  if (table == st.published_routes && !st.routes_sending.due()) return;  // nothing new (each tick, mostly)
  if (st.deps.routes) st.deps.routes->set(table);  // the head's ingress: at once
  if (table.placed != st.published_routes.placed) return send_routes_to_nodes(self, std::move(table));
  switch (st.routes_sending.on_change(st.now(), route_publish_gap)) {
    case coalesced_send::verdict::send_now: return send_routes_to_nodes(self, std::move(table));
    case coalesced_send::verdict::schedule:
      return self->delayed_send(self, st.routes_sending.wait(), routes_atom::value);
    case coalesced_send::verdict::already_due: return;
  }
}

void send_routes_to_nodes(self_ptr self, route_table table) {
  auto& st = self->state;
  st.routes_sending.sent(st.now());
  const auto change = diff_routes(st.published_routes, table);
  st.published_digest = change.digest;
  std::optional<route_delta> whole;  // made only for a node new to the table
  for (const auto& [id, _] : table.nodes) {
    if (st.published_routes.nodes.count(id)) {
      send_route_delta(self, change, id);
      continue;
    }
    if (!whole) whole = whole_routes(table);
    send_route_delta(self, *whole, id);
  }
  st.published_routes = std::move(table);
}

void send_whole_routes(self_ptr self, std::uint32_t node) {
  send_route_delta(self, whole_routes(self->state.published_routes), node);
}

void check_routes_held(self_ptr self, std::uint32_t node, std::uint64_t epoch, std::uint64_t digest) {
  auto& st = self->state;
  if (!st.published_routes.nodes.count(node)) return;  // not in the table: it hears none
  if (epoch == st.published_routes.epoch && digest == st.published_digest) return;
  send_route_delta(self, version_check(st.published_routes.epoch, st.published_digest), node);
}

}  // namespace atl::registry_detail
