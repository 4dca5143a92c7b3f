// The registry's shell (actors/registry/registry.hpp): its state set up and restored, and
// each message handed to the file that handles it.
#include "actors/registry/registry.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/registry/control.hpp"
#include "actors/registry/cursor.hpp"
#include "actors/registry/data.hpp"
#include "actors/registry/lifecycle.hpp"
#include "actors/registry/nodes.hpp"
#include "actors/registry/phase.hpp"
#include "actors/registry/placements.hpp"
#include "actors/registry/reports.hpp"
#include "actors/shared/guarded_handler.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace registry_detail {
namespace {

using json = nlohmann::json;

// A restarted head: members must heartbeat again, placements are confirmed again.
void restore(self_ptr self) {
  auto& st = self->state;
  const auto now = st.now();
  if (auto phase = parse_run_phase(st.snap.run_state)) st.phase = *phase;
  else log_error("registry: " + phase.err().describe());
  for (const auto& m : st.snap.members) {
    node_view n;
    n.record = m;
    auto state = parse_stored_member_state(m.state);
    if (!state) log_error("registry: node " + std::to_string(m.node_id) + ": " + state.err().describe());
    n.state = state ? *state : member_state::dead;
    n.last_seen = n.since = now;
    st.nodes[m.node_id] = n;
    for (std::size_t k = 0; k < m.workers.size(); ++k) {
      worker_view w;
      w.id = m.workers[k];
      w.node_id = m.node_id;
      w.rank = k < m.ranks.size() ? m.ranks[k] : 0;
      w.device = k < m.devices.size() ? m.devices[k] : "";
      w.done = std::find(st.snap.finished.begin(), st.snap.finished.end(), w.id) != st.snap.finished.end();
      st.workers[w.id] = w;
    }
  }
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto cp = st.deps.checkpoints->latest(static_cast<std::uint32_t>(f));
    if (cp && *cp) st.fragments[f].round = (*cp)->round;
    // Placed before the restart: confirmed again by the coordinator's MembershipRequest
    // (its node is told again every tick until then).
    if (f < st.snap.placements.size()) st.fragments[f].placed_on = st.snap.placements[f];
  }
  for (const auto& [id, n] : st.nodes)  // a full lease for each node that hosts anything
    if (hosts_placed(n.state)) watch_lease(self, id);
  for (auto& h : st.handovers) h.since = now;  // a hand-over in progress gets a full cluster.handover_ms again
  replace_orphaned_coordinators(self);  // hosts that left or died before the restart
  place_replica_keepers(self);
  restore_data_cursor(self);
}

}  // namespace
}  // namespace registry_detail

caf::behavior registry_actor(caf::stateful_actor<registry_state>* self, registry_deps deps, registry_snapshot snap) {
  using namespace registry_detail;
  auto& st = self->state;
  st.deps = deps;
  st.snap = std::move(snap);
  st.clock = &self->clock();
  st.started = st.now();
  st.mail = std::make_unique<mailer>(*deps.net, registry_id(), st.snap.cluster_id);
  auto cfg = parse_config_text(st.snap.config_toml, "stored config");
  if (cfg) st.cfg = *cfg;
  else log_error("registry: " + cfg.err().describe());
  st.fragments.resize(static_cast<std::size_t>(sync_units(st.cfg)));  // a coordinator each
  size_keeper_groups(st);
  if (!deps.metrics_path.empty()) st.metrics = metrics_writer(deps.metrics_path);
  self->set_down_handler([=](caf::down_msg& down) { on_proxy_down(self, down); });
  restore(self);
  self->delayed_send(self, std::chrono::milliseconds(st.cfg.heartbeat_ms), tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        guarded(*self->state.mail, *msg, self->state.snap.epoch, "registry.handler", [&] {
          auto& st = self->state;
          const auto env = msg->envelope();
          if (env.isHello()) on_hello(self, msg);
          else if (env.isHeartbeat()) on_heartbeat(self, msg);
          else if (env.isControlRequest()) on_control(self, msg);
          else if (env.isProgress() || env.isEvalReport() || env.isWorkerDone() || env.isRoundAck())
            on_worker_report(self, msg);
          else if (env.isRoundReport()) on_round_report(self, msg);
          else if (env.isRoundProgress()) on_round_progress(self, msg);
          else if (env.isGoodbye()) on_goodbye(self, msg);
          else if (env.isLeaveRequest()) on_leave_request(self, msg);
          else if (env.isKeeperReady()) on_keeper_ready(self, msg);
          else if (env.isMembershipRequest()) on_membership_request(self, msg);
          else if (env.isPeerTableRequest()) on_peer_table_request(self, msg);
          else if (env.isDataLeaseRequest()) on_data_lease_request(self, msg);
          else if (env.isDataTie()) on_data_tie(self, msg);
          else if (env.isRefusal())
            log_warn("registry: refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
          else st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.snap.epoch);
        });
      },
      [=](tick_atom) {
        send_placements(self);
        send_keeper_placement(self);  // to a replica until it says it runs there (a repeat asks if it is ready)
        send_keeper_drops(self);
        advance_handover(self);  // a hand-over that timed out lets its node go
        publish_routes(self);
        publish_membership(
            self);  // what changed (a lost one is repaired when the coordinator's progress names another)
        update_run_phase(self);  // a summary waiting for a RoundReport gives up in time
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.heartbeat_ms), tick_atom::value);
      },
      [=](routes_atom) { send_routes_to_nodes(self, routes_of(self->state)); },
      [=](members_atom) { send_membership_now(self); },
      [=](admit_atom) { admit_new_nodes(self); },
      [=](stop_atom) { self->quit(); },
      // The head's transport saw a node's connection close (runtime/transport/zmq_transport.hpp).
      [=](link_lost_atom, const std::string& peer) { on_link_lost(self, peer); },
      // An in-process query (the head's HTTP server): the control commands that only read,
      // and leave. Answers ok and the JSON body.
      [=](view_atom, const std::string& command, const std::string& argument) -> std::tuple<bool, std::string> {
        if (command == "down" || command == "model")
          return std::make_tuple(false, json{{"error", "not over HTTP"}}.dump());
        std::vector<wire::tensor> unused;
        auto [ok, body] = answer(self, command, argument, unused);
        return std::make_tuple(ok, std::move(body));
      },
  };
}

}  // namespace atl
