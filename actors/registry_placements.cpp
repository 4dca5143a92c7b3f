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
  if (!moves.empty()) persist(self);
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
  send_keeper_placement(self);
  publish_membership(self);  // coordinators commit to the new set of keepers
}

}  // namespace atl::registry_detail
