#include "actors/registry/registry.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include <caf/all.hpp>

#include "actors/decisions/placement.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/decisions/run_phase.hpp"
#include "actors/registry/internal.hpp"
#include "actors/registry/views.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/model_transfer.hpp"

namespace atl {
namespace registry_detail {
namespace {

using json = nlohmann::json;

// The Membership as the coordinators are to hold it: the workers with steps left (a
// finished one never contributes again), sorted; the quorum; the keepers of a commit.
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
  view.keepers = commit_keepers_of(st);
  return view;
}

void send_membership(self_ptr self, const std::string& to, const membership_delta& d) {
  auto& st = self->state;
  wire::outgoing out;
  write_membership(d, out.envelope.initMembership());
  st.mail->send(to, st.snap.epoch, out);
}

void set_run_phase(self_ptr self, run_phase to) {
  auto& st = self->state;
  const auto next = next_phase(st.phase, to);
  if (!next) return log_error("registry: " + next.err().describe());
  log_info(std::string("registry: run ") + to_string(st.phase) + " -> " + to_string(*next));
  st.phase = *next;
  persist(self);
}

void shut_down_cluster(self_ptr self) {
  stop_every_node(self, "atoll down");
  log_info("registry: shutting down on request");
  self->delayed_send(self, std::chrono::milliseconds(300), stop_atom::value);  // let replies flush
}

// "model": the run's model file for a joining node, described or one chunk of it
// (runtime/transport/model_transfer.hpp).
expected<json> model_answer(const registry_state& st, const std::string& argument, std::vector<wire::tensor>& out) {
  if (argument.empty()) {
    if (st.deps.model_file.empty()) return json{{"digest", ""}, {"bytes", 0}};
    std::error_code ec;
    const auto size = std::filesystem::file_size(st.deps.model_file, ec);
    if (ec) return make_error(errc::storage_failure, st.deps.model_file + ": " + ec.message());
    return json{{"digest", st.cfg.digest}, {"bytes", size}};
  }
  if (st.deps.model_file.empty()) return make_error(errc::bad_model, "this run has no model file");
  char* end = nullptr;
  const auto offset = std::strtoull(argument.c_str(), &end, 10);
  if (end == argument.c_str() || *end != '\0') return make_error(errc::invalid_config, "not an offset: " + argument);
  auto chunk = read_file_chunk(st.deps.model_file, offset, model_chunk_bytes);
  if (!chunk) return chunk.err();
  wire::tensor t;
  t.dtype = schema::DType::UINT8;
  t.shape = {chunk->size()};
  t.data = std::move(*chunk);
  out.push_back(std::move(t));
  return json{{"offset", offset}, {"bytes", out.back().data.size()}};
}

// A control command's answer, the same for the wire (atollctl, atoll leave) and for the
// head's HTTP server: ok and the JSON body (an error's description when not ok). A model
// chunk goes into `tensors`.
std::pair<bool, std::string> answer(self_ptr self, const std::string& command, const std::string& argument,
                                    std::vector<wire::tensor>& tensors) {
  auto& st = self->state;
  // An unknown command answers its error text alone; a failed one, the error described.
  expected<json> body = json{{"error", "unknown command '" + command + "'"}};
  bool known = true;
  if (command == "status") body = views::status(st, st.now());
  else if (command == "members") body = views::members(st, st.now(), argument);
  else if (command == "fragments") body = views::fragments(st, true);
  else if (command == "actors") body = views::actors(st);
  else if (command == "checkpoints") body = views::checkpoints(st);
  else if (command == "down") body = json{{"stopping", true}};
  else if (command == "leave") body = start_leave(self, argument);
  else if (command == "model") body = model_answer(st, argument, tensors);
  else if (command == "explain") body = views::explain(st, st.now(), argument);
  else if (command == "dashboard") body = views::dashboard(st, st.now(), argument);
  else if (command == "data") body = views::data(st);
  else known = false;
  return {known && body.has_value(), body ? body->dump() : json{{"error", body.err().describe()}}.dump()};
}

void on_control(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto request = msg->envelope().getControlRequest();
  const std::string command = request.getCommand();
  wire::outgoing out;
  const auto [ok, body] = answer(self, command, request.getArgument(), out.tensors);
  auto reply = out.envelope.initControlReply();
  reply.setOk(ok);
  reply.setJson(body);
  st.mail->send(msg->sender(), st.snap.epoch, out);
  if (command == "down") shut_down_cluster(self);
}

void on_membership_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto f = msg->envelope().getMembershipRequest().getFragment();
  if (f < st.fragments.size() && msg->sender() == coordinator_id(f)) st.fragments[f].confirmed = true;
  send_membership(self, msg->sender(), whole_membership(membership_of(st)));
  if (f < st.fragments.size() && msg->sender() == coordinator_id(f)) st.fragments[f].holds_membership = true;
}

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
  st.handover_since = now;  // a hand-over in progress gets a full cluster.handover_ms again
  replace_orphaned_coordinators(self);  // hosts that left or died before the restart
  place_replica_keepers(self);
  restore_data_cursor(self);
}

// A round some worker merged (it acked it) whose RoundReport has not come: the report
// travels from the coordinator's node on its own link and may arrive after the WorkerDone.
bool a_merged_round_is_unreported(const registry_state& st) {
  for (const auto& f : st.fragments)
    for (const auto& [worker, acked] : f.worker_digests)
      if (acked.first > f.round) return true;
  return false;
}

}  // namespace

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
  // What changed since the last published (a version check if nothing did), the same to
  // every coordinator; a coordinator placed since gets the whole one (one that holds another
  // Membership all the same, a delta lost, asks for the whole).
  std::optional<membership_delta> change, whole;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& unit = st.fragments[f];
    if (unit.placed_on.empty()) continue;
    const bool delta = unit.holds_membership && st.published_members;
    auto& d = delta ? change : whole;
    if (!d) d = delta ? diff_membership(*st.published_members, now) : whole_membership(now);
    send_membership(self, coordinator_id(static_cast<std::uint32_t>(f)), *d);
    unit.holds_membership = true;
  }
  st.published_members = std::move(now);
}

namespace {

void start_training(self_ptr self) {
  auto& st = self->state;
  set_run_phase(self, run_phase::training);
  apply_coordinator_moves(self, placement::place_coordinators(st.fragments.size(), node_facts(st)), false);
  place_replica_keepers(self);
}

void finish_run(self_ptr self) {
  auto& st = self->state;
  data_run_finished(self);
  set_run_phase(self, run_phase::finished);
  // Nodes whose workers finished may still be up, hosting a keeper replica until now
  // (actors/node/node_agent.cpp): every node still there stops.
  stop_every_node(self, run_finished_reason);
  const auto finished =
      std::count_if(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; });
  json summary = {{"val_loss", st.last_val_loss},
                  {"wall_s", std::chrono::duration<double>(st.now() - st.started).count()},
                  {"workers", finished}};
  if (const auto* c = st.deps.counters) {  // what the head's link carried, in and out (relayed: both ways)
    summary["head_link_bytes"] = c->bytes_in.load() + c->bytes_relayed.load() + c->bytes_out.load();
    summary["head_relayed_bytes"] = c->bytes_relayed.load();
    summary["head_relayed_tensor_bytes"] = c->tensor_bytes_relayed.load();
    // Tensors the head's own actors took in or sent (its keeper's commits and loads).
    summary["head_tensor_bytes"] = c->tensor_bytes_in.load() + c->tensor_bytes_out.load();
  }
  st.metrics.write("summary", summary);
}

}  // namespace

void update_run_phase(self_ptr self) {
  auto& st = self->state;
  run_facts facts;
  facts.phase = st.phase;
  facts.min_workers = static_cast<std::size_t>(std::max<std::int64_t>(0, st.cfg.min_workers));
  const auto live = live_workers(st);
  facts.live_workers = live.size();
  facts.live_training = static_cast<std::size_t>(std::count_if(live.begin(), live.end(), [&](const std::string& w) {
    auto it = st.workers.find(w);
    return it == st.workers.end() || !it->second.done;
  }));
  facts.any_finished = any_worker_done(st);
  facts.merged_round_unreported = a_merged_round_is_unreported(st);
  if (st.workers_done_at) facts.all_done_for = st.now() - *st.workers_done_at;
  switch (decide_run_step(facts)) {
    case run_step::stay: return;
    case run_step::start: return start_training(self);
    case run_step::restart_clock: st.workers_done_at.reset(); return;
    case run_step::wait_for_reports:
      if (!st.workers_done_at) st.workers_done_at = st.now();
      return;
    case run_step::finish: return finish_run(self);
  }
}

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
  if (!deps.metrics_path.empty()) st.metrics = metrics_writer(deps.metrics_path);
  self->set_down_handler([=](caf::down_msg& down) { on_proxy_down(self, down); });
  restore(self);
  self->delayed_send(self, std::chrono::milliseconds(st.cfg.heartbeat_ms), tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
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
      },
      [=](tick_atom) {
        send_placements(self);
        send_keeper_placement(self);  // repeated until it runs there (a repeat asks if it is ready)
        advance_handover(self);  // a hand-over that timed out lets its node go
        publish_routes(self);
        publish_membership(self);  // again each tick: one lost with a dropped link is repaired
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
