#include "actors/node/node_agent.hpp"

#include <chrono>
#include <thread>

#include <caf/all.hpp>

#include "actors/node/node_messages.hpp"
#include "actors/node/node_workers.hpp"
#include "actors/shared/guarded_handler.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/route_delta.hpp"

namespace atl {
namespace {

using self_ptr = caf::stateful_actor<node_agent_state>*;
using phase = node_agent_state::phase;

void stop_all(self_ptr self, const std::string& reason);
void give_up(self_ptr self, const error& why, const std::string& reason);

void send_hello(self_ptr self) {
  auto& st = self->state;
  wire::outgoing out;
  write_hello(out, st.cfg, st.node_id);
  st.mail->send(registry_id(), st.epoch, out);
}

void send_heartbeat(self_ptr self) {
  auto& st = self->state;
  wire::outgoing out;
  write_heartbeat(out, {st.node_id, st.worker_restarts, st.routes.table().epoch, st.routes.digest()},
                  st.net->counters());
  st.mail->send(registry_id(), st.epoch, out);
}

void on_welcome(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (st.current != phase::registering) return;  // a reconnect answer: ids unchanged
  const auto welcome = msg->envelope().getWelcome();
  auto run = parse_config_text(welcome.getConfigToml(), "config from head");
  if (!run) {
    give_up(self, make_error(run.err().code, "the head's config is not valid here: " + run.err().message),
            "bad config");
    return;
  }
  st.run = *run;
  st.node_id = welcome.getNodeId();
  st.epoch = msg->epoch();
  st.cluster->set(msg->cluster_id());
  st.mail->set_cluster(msg->cluster_id());
  const std::string old_id = st.mail->self();
  const std::string new_id = node_actor_id(st.node_id);
  st.local->add(new_id, caf::actor_cast<caf::actor>(self));
  st.local->remove(old_id);
  st.mail->set_self(new_id);
  set_log_name("atoll " + new_id);
  log_info("joined cluster " + msg->cluster_id() + " as " + new_id + " (epoch " + std::to_string(st.epoch) + ")");
  restart_policy policy;
  policy.max_restarts = static_cast<int>(st.run.restart_limit);
  policy.window = std::chrono::milliseconds(st.run.restart_window_ms);
  policy.backoff = std::chrono::milliseconds(st.run.restart_backoff_ms);
  for (const auto slot : welcome.getWorkers()) {
    supervised_worker w;
    w.budget = restart_budget(policy);
    w.id = slot.getId();
    w.spec.rank = slot.getRank();
    w.spec.world_size = welcome.getWorldSize();
    w.spec.device = slot.getDevice();
    st.workers.push_back(w);
  }
  if (st.cfg.prepare) {
    auto layouts = st.cfg.prepare(st.run, st.workers.size(), welcome.getWorldSize());
    if (!layouts) {
      give_up(self, make_error(layouts.err().code, "cannot train here: " + layouts.err().message), "cannot train here");
      return;
    }
    st.cpu_worker_layouts = std::move(*layouts);
  }
  st.current = phase::running;
  if (st.cfg.health) st.cfg.health->set_ready_in(st.epoch);
  send_heartbeat(self);  // teaches the head the route to our new id right away
  for (std::size_t i = 0; i < st.workers.size(); ++i) node_workers::spawn(self, i);
}

placed_actors::host placed_host(const node_agent_state& st) { return {st.net, st.local, st.mail->cluster(), &st.run}; }

void on_place_coordinator(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto fragment = msg->envelope().getPlaceCoordinator().getFragment();
  const std::string id = coordinator_id(fragment);
  const auto at = placed_host(st);
  if (st.placed.hosts(at, id)) return st.placed.confirm(self, at, id);  // a repeated placement
  if (st.current != phase::running || fragment >= static_cast<std::uint32_t>(sync_units(st.run)))
    return st.mail->refuse(*msg, make_error(errc::unexpected_message, "cannot host " + id + " now"), st.epoch);
  st.placed.start_coordinator(self, at, fragment);
}

void on_place_keeper(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto place = msg->envelope().getPlaceKeeper();
  const std::string id = place.getKeeper();
  const auto at = placed_host(st);
  if (st.placed.hosts(at, id)) return st.placed.confirm(self, at, id);  // a repeated placement
  const auto keeper = parse_actor_id(id);
  if (st.current != phase::running || st.cfg.data_dir.empty() || !keeper || keeper->kind != actor_kind::keeper)
    return st.mail->refuse(*msg, make_error(errc::unexpected_message, "cannot host " + id + " here"), st.epoch);
  std::vector<std::uint32_t> units;
  for (const auto u : place.getUnits()) units.push_back(u);
  if (auto err = st.placed.start_keeper(self, at, id, keeper->number, std::string(place.getSource()), units,
                                        st.cfg.data_dir, st.cfg.open_keeper_store))
    st.mail->refuse(*msg, err, st.epoch);
}

// Stops every local actor, says goodbye to the registry (so no round waits for this
// node's workers until its lease runs out), and quits.
void stop_all(self_ptr self, const std::string& reason) {
  auto& st = self->state;
  for (auto& w : st.workers)
    if (w.handle && !w.finished) self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  st.placed.stop_all(self, *st.local);  // before the Goodbye lets the registry place them elsewhere
  if (st.node_id != 0 && st.current == phase::running) {
    wire::outgoing bye;
    auto g = bye.envelope.initGoodbye();
    g.setNodeId(st.node_id);
    g.setReason(reason);
    st.mail->send(registry_id(), st.epoch, bye);
  }
  st.current = phase::done;
  // A node that gave up exits with an error, so its process exits non-zero.
  self->quit(st.failed ? caf::make_error(caf::sec::runtime_error) : caf::error{});
}

// The node cannot go on: says why (the log, and on_failure for a process that embeds the
// node), and stops with an error.
void give_up(self_ptr self, const error& why, const std::string& reason) {
  auto& st = self->state;
  log_error("node: " + why.describe());
  if (st.cfg.on_failure) st.cfg.on_failure(why);
  st.failed = true;
  stop_all(self, reason);
}

void on_worker_down(self_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  auto outcome = node_workers::on_down(self, down);
  if (outcome.what == node_workers::down_outcome::give_up) {
    give_up(self, outcome.why, "a worker failed too often");  // escalates: the process exits non-zero
    return;
  }
  if (outcome.what != node_workers::down_outcome::every_worker_finished) return;
  // A keeper replica's disk holds one of the two copies of the newest rounds (with
  // storage.keepers = nodes, one of the only two), which a worker still training may need;
  // a coordinator's last results may still be on their way to a slower worker (leaving
  // with them unsent hung a data-parallel run whose throttled worker waited for the last
  // average). Either leaves when the run finishes, not with our workers.
  if (st.placed.any()) {
    log_info(
        "every worker finished; the node stays while it hosts a keeper replica or a coordinator, until the run "
        "finishes");
    return;
  }
  log_info("every worker finished; node exits");
  stop_all(self, "finished");
}

// The link to the head dropped and came back: what was in flight through the old
// connection may be lost, and only the workers know what they wait on.
void resend_after_reconnect(self_ptr self) {
  auto& st = self->state;
  const auto connections = st.net->counters().connections.load();
  const bool reconnected = st.connections_seen > 0 && connections > st.connections_seen;
  st.connections_seen = connections;
  if (!reconnected) return;
  log_warn("the link to the head came back; workers resend what they wait on");
  for (const auto& c : st.placed.coordinators()) self->send(c, resend_atom::value);  // their last round reports
  for (const auto& w : st.workers) {
    if (w.handle) self->send(w.handle, resend_atom::value);
    if (!w.done) continue;
    mailer as_worker(*st.net, w.id, st.mail->cluster());  // the report is the worker's, which has quit
    send_worker_done(as_worker, registry_id(), st.epoch, *w.done);
  }
}

// Until the registry names us, we answer to a unique provisional id (provisional_node_id).
void take_provisional_id(self_ptr self) {
  auto& st = self->state;
  const std::string provisional = provisional_node_id(st.cfg.provisional_token);
  if (st.mail) {
    st.local->remove(st.mail->self());
    st.mail->set_self(provisional);
  } else {
    st.mail = std::make_unique<mailer>(*st.net, provisional, "");
  }
  st.local->add(provisional, caf::actor_cast<caf::actor>(self));
}

// The registry declared this node dead (stopped or cut off past its lease) and gave its
// workers' places away. Stop everything local and register again as a new node; the new
// workers fetch the committed state like any joiner.
void rejoin(self_ptr self, const std::string& why) {
  auto& st = self->state;
  log_warn("declared gone by the registry (" + why + "); stopping local actors and registering again");
  for (auto& w : st.workers) {
    st.local->remove(w.id);
    if (w.handle) self->send_exit(w.handle, caf::exit_reason::user_shutdown);
  }
  st.workers.clear();  // their down messages now match nothing: no restarts
  st.placed.stop_all(self, *st.local);
  st.node_id = 0;
  st.current = phase::registering;
  if (st.cfg.health) st.cfg.health->set_ready_in(0);
  take_provisional_id(self);
  set_log_name("atoll node");
  send_hello(self);
}

// SIGTERM or SIGINT. A node hosting a keeper replica asks the registry to take it out as
// `atoll leave` does, so that the replica is handed over before it goes; the registry's
// Shutdown then stops it. If none comes within cluster.handover_ms (and a little), it
// stops anyway: a head that cannot be reached must not keep it.
void on_stop_signal(self_ptr self) {
  auto& st = self->state;
  if (st.leave_requested || st.current != phase::running || !st.placed.any_keeper()) {
    stop_all(self, st.leave_requested ? "the hand-over did not finish in time" : "signal (SIGTERM or SIGINT)");
    return;
  }
  st.leave_requested = true;
  if (st.cfg.health) st.cfg.health->set_ready_in(0);  // leaving: no longer a member to route to
  log_info("signal received while hosting a keeper replica: leaving once it is handed over");
  wire::outgoing out;
  auto leave = out.envelope.initLeaveRequest();
  leave.setNodeId(st.node_id);
  leave.setReason("SIGTERM");
  st.mail->send(registry_id(), st.epoch, out);
  self->delayed_send(self, std::chrono::milliseconds(st.run.handover_ms + 5 * st.run.heartbeat_ms), stop_atom::value);
}

// Only the registry's table counts, and only while this node has an id to route from. It
// comes as what changed (runtime/transport/route_delta.hpp, route_follower decides).
void on_peer_table(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (msg->sender() != registry_id() || st.current != phase::running || !st.cfg.on_routes) return;
  using effect = route_follower::effect;
  const auto change = read_route_delta(msg->envelope().getPeerTable());
  switch (st.routes.on_table(change, self->clock().now(), std::chrono::milliseconds(st.run.heartbeat_ms))) {
    case effect::nothing: return;
    case effect::hand_table_to_links:
      return st.cfg.on_routes(routes_update{st.routes.table(), st.routes.digest(), change, st.node_id});
    case effect::ask_for_whole_table: {
      wire::outgoing out;
      out.envelope.initPeerTableRequest().setNodeId(st.node_id);
      st.mail->send(registry_id(), st.epoch, out);
      return;
    }
  }
}

// A message from the registry below the highest epoch it has sent us comes from a head
// that no longer leads (cut off, then deposed by an election): refused, not acted on.
bool fenced_as_stale(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  if (msg.epoch() >= st.registry_epoch) {
    st.registry_epoch = msg.epoch();
    return false;
  }
  log_warn("refused " + std::string(wire::kind_name(msg.kind())) + " of epoch " + std::to_string(msg.epoch()) +
           " from the registry: it has sent epoch " + std::to_string(st.registry_epoch) +
           " (a head that no longer leads)");
  if (msg.kind() != schema::Envelope::REFUSAL)  // never answer a refusal with one
    st.mail->refuse(msg,
                    make_error(errc::stale_epoch,
                               "epoch " + std::to_string(msg.epoch()) + " < " + std::to_string(st.registry_epoch)),
                    st.registry_epoch);
  return true;
}

}  // namespace

caf::behavior node_agent_actor(caf::stateful_actor<node_agent_state>* self, transport* net, directory* local,
                               cluster_identity* cluster, node_agent_config cfg) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.net = net;
  st.local = local;
  st.cluster = cluster;
  take_provisional_id(self);
  self->set_down_handler([=](caf::down_msg& down) { on_worker_down(self, down); });
  send_hello(self);
  self->delayed_send(self, std::chrono::milliseconds(1000), tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        guarded(*self->state.mail, *msg, self->state.epoch, "node.handler", [&] {
          const auto env = msg->envelope();
          if (msg->sender() == registry_id() && fenced_as_stale(self, *msg)) return;
          if (env.isWelcome()) on_welcome(self, msg);
          else if (env.isPlaceCoordinator()) on_place_coordinator(self, msg);
          else if (env.isPlaceKeeper()) on_place_keeper(self, msg);
          else if (env.isDropKeeper()) {
            if (msg->sender() == registry_id())
              self->state.placed.stop_keeper(self, *self->state.local, env.getDropKeeper().getKeeper().cStr());
          } else if (env.isPeerTable()) on_peer_table(self, msg);
          else if (env.isHeartbeatRequest()) {  // the head lost our connection: we are alive
            if (msg->sender() == registry_id() && self->state.current == phase::running) send_heartbeat(self);
          } else if (env.isShutdown()) {
            log_info("shutdown requested by " + msg->sender() + ": " + env.getShutdown().getReason().cStr());
            stop_all(self, env.getShutdown().getReason().cStr());
          } else if (env.isRefusal()) {
            const auto r = env.getRefusal();
            log_warn("refused by " + msg->sender() + ": " + r.getMessage().cStr());
            if (msg->sender() == registry_id() && self->state.leave_requested) {
              stop_all(self, "leaving (the registry refused: nothing to hand over)");
              return;
            }
            if (msg->sender() == registry_id() && static_cast<errc>(r.getCode()) == errc::model_mismatch) {
              give_up(self, make_error(errc::model_mismatch, r.getMessage().cStr()), "model mismatch");
              return;
            }
            if (msg->sender() == registry_id() && static_cast<errc>(r.getCode()) == errc::stale_epoch &&
                self->state.current == phase::running)
              rejoin(self, r.getMessage().cStr());
          }
        });
      },
      [=](tick_atom) {
        auto& st = self->state;
        // The process's liveness (runtime/process/health.hpp): this tick runs whether or
        // not the head answers. A failing point stalls it, as a stuck actor system would.
        if (ATL_FAIL_POINT("node.stall") && st.current == phase::running)
          std::this_thread::sleep_for(std::chrono::hours(24));
        if (st.cfg.health) st.cfg.health->beat(self->clock().now());
        if (st.current == phase::registering) {
          send_hello(self);
        } else if (st.current == phase::running) {
          send_heartbeat(self);
          resend_after_reconnect(self);
        }
        const auto interval = st.current == phase::running ? st.run.heartbeat_ms : 1000;
        self->delayed_send(self, std::chrono::milliseconds(interval), tick_atom::value);
      },
      [=](done_atom, std::uint64_t index, const worker_done_report& report) {
        if (index < self->state.workers.size()) self->state.workers[index].done = report;
      },
      [=](threads_atom, int torch, int blas) {  // a CPU worker's trial settled: restarts reuse it
        self->state.cpu_worker_layouts = {thread_layout{torch, blas}};
      },
      [=](restart_atom, std::uint64_t index) {
        if (self->state.current == phase::running && index < self->state.workers.size())
          node_workers::spawn(self, index);
      },
      [=](stop_atom) { on_stop_signal(self); },
  };
}

}  // namespace atl
