// The placement decisions applied (actors/decisions/placement.hpp; actors/registry/
// placements.hpp): persisted before anyone hears of them, then sent, and sent again every
// tick until the placed actor runs (actors/registry/outbox.hpp).
#include "actors/registry/placements.hpp"

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

// One step of a hand-over (placement::decide_handover) applied; true if it changed the
// places, so that the next step can be decided at once.
bool apply_handover_step(self_ptr self) {
  auto& st = self->state;
  auto& snap = st.snap;
  const bool timed_out = st.now() - st.handover_since > std::chrono::milliseconds(st.cfg.handover_ms);
  const auto d = placement::decide_handover(replica_slots(st), pending_handover(st), node_facts(st),
                                            st.phase == run_phase::training, st.incoming_ready, timed_out);
  using step = placement::handover_decision::step;
  auto& slot_host = snap.incoming_for == 1 ? snap.replica_keeper : snap.second_replica_keeper;
  auto& slot_number = snap.incoming_for == 1 ? snap.replica_keeper_number : snap.second_replica_keeper_number;
  switch (d.what) {
    case step::start: {
      const auto leaving = d.slot == 0 ? snap.replica_keeper_number : snap.second_replica_keeper_number;
      snap.incoming_for = static_cast<std::uint32_t>(d.slot + 1);
      snap.incoming_keeper = d.host;
      snap.incoming_keeper_number = snap.next_keeper_number++;
      st.keeper_sources[keeper_id(snap.incoming_keeper_number)] = keeper_id(leaving);  // it holds every round
      st.handover_since = st.now();
      st.incoming_ready = false;
      break;
    }
    case step::promote:
      slot_host = snap.incoming_keeper;
      slot_number = snap.incoming_keeper_number;
      [[fallthrough]];
    case step::cancel:
      snap.incoming_for = 0;
      snap.incoming_keeper.clear();
      snap.incoming_keeper_number = 0;
      st.incoming_ready = false;
      break;
    case step::none: break;
  }
  bool released = false;
  for (const auto& host : d.release) {
    const auto id = node_of(host);
    if (!id || !st.nodes.count(*id) || st.nodes.at(*id).shutdown_sent) continue;
    st.nodes.at(*id).shutdown_sent = true;
    send_shutdown(self, *id, "atoll leave");
    released = true;
  }
  if (d.what != step::none) {
    log_info("registry: " + d.reason);
    publish_keeper_change(self);
    return true;
  }
  if (released && !d.reason.empty()) log_warn("registry: " + d.reason);
  return false;
}

}  // namespace

// Hand-overs advance until nothing changes (a promotion may let the other place's draining
// host start its own). Called on every change of membership, a KeeperReady and each tick.
void advance_handover(self_ptr self) {
  for (int steps = 0; steps < 4 && apply_handover_step(self); ++steps) {}
}

// Keeper replication: with a node that can keep (`atoll join --run-dir`), keeper/1 runs
// there and every commit needs its acknowledgement as well as the head's, so a round
// acknowledged as committed is on two machines. With storage.keepers = nodes, keeper/2 runs
// on a second such node, and the head's keeper leaves the commits while both run. A new
// replica catches up from the other one if that kept its host (it held every commit since
// it was placed, and the head's link stays free of tensors), else from the head's keeper.
void place_replica_keepers(self_ptr self) {
  advance_handover(self);  // first: a hand-over's incoming replica takes a place whose host died
  auto& st = self->state;
  const bool training = st.phase == run_phase::training;
  const auto facts = node_facts(st);
  auto& first = st.snap.replica_keeper;
  auto& second = st.snap.second_replica_keeper;
  const auto first_number = st.snap.replica_keeper_number;
  const auto second_number = st.snap.second_replica_keeper_number;
  const auto& incoming = st.snap.incoming_keeper;  // a hand-over's new replica, if any
  const auto first_choice = placement::choose_replica_keeper(first_number, first, {second, incoming}, facts, training);
  const auto first_host = first_choice.changed ? first_choice.host : first;
  const auto second_choice =
      st.cfg.keepers == "nodes"
          ? placement::choose_replica_keeper(second_number, second, {first_host, incoming}, facts, training)
          : placement::keeper_choice{};
  if (!first_choice.changed && !second_choice.changed) return;
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
  publish_keeper_change(self);
}

}  // namespace atl::registry_detail
