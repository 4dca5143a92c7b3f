// The placement decisions applied (actors/decisions/placement.hpp; actors/registry/
// placements.hpp): persisted before anyone hears of them, then sent, and sent again every
// tick until the placed actor runs (actors/registry/outbox.hpp).
#include "actors/registry/placements.hpp"

#include <algorithm>

#include "actors/registry/queries.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {

// Placement decisions are persisted before anyone hears of them: a restarted head must not
// place a second coordinator.
void apply_coordinator_moves(self_ptr self, const std::vector<placement::coordinator_move>& moves, bool warn) {
  auto& st = self->state;
  for (const auto& m : moves) {
    st.fragments[m.fragment].placed_on = m.to;
    st.fragments[m.fragment].confirmed = false;
    st.fragments[m.fragment].holds_membership = false;  // a new coordinator: the whole one first
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
  const auto moves = placement::replace_orphans(placements, node_facts(st));
  if (!moves.empty()) apply_coordinator_moves(self, moves, true);  // unconfirmed ones go again each tick
}

namespace {

// The routes, the coordinators' commit set and the nodes' placements after a change of
// the replica keepers, persisted first.
void publish_keeper_change(self_ptr self) {
  persist(self);
  publish_routes(self);
  send_keeper_placement(self);
  publish_membership(self);  // coordinators commit to the new set of keepers
}

// One step of each group's hand-over (placement::decide_handover) applied; true if it
// changed a group's places, so that the next step can be decided at once. A draining node
// leaves once no group holds it.
bool apply_handover_step(self_ptr self) {
  auto& st = self->state;
  const auto facts = node_facts(st);
  const bool training = st.phase == run_phase::training;
  bool changed = false;
  std::vector<std::string> release;  // draining hosts every group lets go
  std::string release_reason;
  for (std::size_t group = 0; group < keeper_groups(st); ++group) {
    auto& g = st.snap.keeper_groups[group];
    auto& progress = st.handovers[group];
    const bool timed_out = st.now() - progress.since > std::chrono::milliseconds(st.cfg.handover_ms);
    const auto d = placement::decide_handover(replica_slots(st, group), pending_handover(st, group), facts, training,
                                              progress.incoming_ready, timed_out, hosts_of_other_groups(st, group));
    using step = placement::handover_decision::step;
    auto& slot_host = g.incoming_for == 1 ? g.replica_keeper : g.second_replica_keeper;
    auto& slot_number = g.incoming_for == 1 ? g.replica_keeper_number : g.second_replica_keeper_number;
    switch (d.what) {
      case step::start: {
        const auto leaving = d.slot == 0 ? g.replica_keeper_number : g.second_replica_keeper_number;
        g.incoming_for = static_cast<std::uint32_t>(d.slot + 1);
        g.incoming_keeper = d.host;
        g.incoming_keeper_number = st.snap.next_keeper_number++;
        g.incoming_spreading = d.spreading;
        st.keeper_sources[keeper_id(g.incoming_keeper_number)] = keeper_id(leaving);  // it holds every round
        progress.since = st.now();
        progress.incoming_ready = false;
        break;
      }
      case step::promote:
        slot_host = g.incoming_keeper;
        slot_number = g.incoming_keeper_number;
        [[fallthrough]];
      case step::cancel:
        g.incoming_for = 0;
        g.incoming_keeper.clear();
        g.incoming_keeper_number = 0;
        g.incoming_spreading = false;
        progress.incoming_ready = false;
        break;
      case step::none: break;
    }
    if (d.drop) st.dropping[keeper_id(d.drop->number)] = {d.drop->host, drop_sends};
    if (group == 0) release = d.release;
    else
      release.erase(std::remove_if(release.begin(), release.end(),
                                   [&](const std::string& host) {
                                     return std::find(d.release.begin(), d.release.end(), host) == d.release.end();
                                   }),
                    release.end());
    if (d.what != step::none) {
      log_info("registry: " + d.reason);
      changed = true;
    } else if (!d.reason.empty()) {
      release_reason = d.reason;
    }
  }
  bool released = false;
  for (const auto& host : release) {
    const auto id = node_of(host);
    if (!id || !st.nodes.count(*id) || st.nodes.at(*id).shutdown_sent) continue;
    st.nodes.at(*id).shutdown_sent = true;
    send_shutdown(self, *id, "atoll leave");
    released = true;
  }
  if (changed) {
    publish_keeper_change(self);
    send_keeper_drops(self);  // after the routes and commits left them
    return true;
  }
  if (released && !release_reason.empty()) log_warn("registry: " + release_reason);
  return false;
}

}  // namespace

// Hand-overs advance until nothing changes (a promotion may let the other place's draining
// host start its own). Called on every change of membership, a KeeperReady and each tick.
void advance_handover(self_ptr self) {
  for (int steps = 0; steps < 4 && apply_handover_step(self); ++steps) {}
}

// Keeper replication: with a node that can keep (`atoll join --run-dir`), each keeper
// group's first replica runs there and every commit of the group's units needs its
// acknowledgement as well as the head's, so a round acknowledged as committed is on two
// machines. With storage.keepers = nodes, the group's second replica runs on another such
// node, and the head's keeper leaves the group's commits while both run. A new replica
// catches up from the other one if that kept its host (it held every commit of the group
// since it was placed, and the head's link stays free of tensors), else from the head's
// keeper. Groups spread: a replica goes to a node no other group uses while there is one.
void place_replica_keepers(self_ptr self) {
  advance_handover(self);  // first: a hand-over's incoming replica takes a place whose host died
  auto& st = self->state;
  const bool training = st.phase == run_phase::training;
  const auto facts = node_facts(st);
  std::vector<std::string> placements;  // each unit's coordinator host
  for (const auto& f : st.fragments) placements.push_back(f.placed_on);
  bool changed = false;
  for (std::size_t group = 0; group < keeper_groups(st); ++group) {
    auto& g = st.snap.keeper_groups[group];
    const auto elsewhere = hosts_of_other_groups(st, group);
    auto& first = g.replica_keeper;
    auto& second = g.second_replica_keeper;
    const auto first_number = g.replica_keeper_number;
    const auto second_number = g.second_replica_keeper_number;
    const auto& incoming = g.incoming_keeper;  // a hand-over's new replica, if any
    // Each slot first tries the host of a coordinator of the group's units, so that one copy
    // of a record stays in the process that made it (the other slot's unit as a second choice).
    const auto hosts = placement::preferred_replica_hosts(group, keeper_groups(st), placements);
    const auto first_choice = placement::choose_replica_keeper(first_number, first, {second, incoming}, facts, training,
                                                               elsewhere, {hosts[0], hosts[1]});
    const auto first_host = first_choice.changed ? first_choice.host : first;
    const auto second_choice = st.cfg.keepers == "nodes"
                                   ? placement::choose_replica_keeper(second_number, second, {first_host, incoming},
                                                                      facts, training, elsewhere, {hosts[1], hosts[0]})
                                   : placement::keeper_choice{};
    if (!first_choice.changed && !second_choice.changed) continue;
    const bool first_kept = !first_choice.changed && !first.empty();
    const bool second_kept = !second_choice.changed && !second.empty();
    const auto apply = [&](std::uint32_t number, const placement::keeper_choice& choice, std::string& host,
                           bool other_kept, std::uint32_t other) {
      if (!choice.changed) return;
      host = choice.host;
      st.keeper_sources[keeper_id(number)] = keeper_id(other_kept ? other : head_keeper_number);
      if (host.empty()) log_warn("registry: " + choice.reason);
      else log_info("registry: " + choice.reason);
    };
    apply(first_number, first_choice, first, second_kept, second_number);
    apply(second_number, second_choice, second, first_kept, first_number);
    changed = true;
  }
  if (changed) publish_keeper_change(self);
}

void size_keeper_groups(registry_state& st) {
  auto& snap = st.snap;
  const auto wanted = placement::keeper_group_count(static_cast<std::size_t>(shards_of(st.cfg)));
  const bool none_placed =
      snap.keeper_groups.size() == 1 && snap.keeper_groups[0] == keeper_group_record{} && snap.next_keeper_number == 3;
  if (none_placed && wanted > 1) {
    snap.keeper_groups.resize(wanted);
    for (std::size_t g = 1; g < wanted; ++g) {
      snap.keeper_groups[g].replica_keeper_number = snap.next_keeper_number++;
      snap.keeper_groups[g].second_replica_keeper_number = snap.next_keeper_number++;
    }
  }
  st.handovers.resize(snap.keeper_groups.size());
}

}  // namespace atl::registry_detail
