// The registry's handlers of a node's messages (actors/registry/nodes.hpp): Hello, Heartbeat,
// Goodbye, a lease that ran out, and `atoll leave`. The moves themselves are lifecycle.cpp's.
#include "actors/registry/nodes.hpp"

#include <algorithm>
#include <iterator>

#include <caf/all.hpp>

#include "actors/registry/lifecycle.hpp"
#include "actors/registry/phase.hpp"
#include "actors/registry/placements.hpp"
#include "actors/registry/queries.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/model_signature.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

void send_welcome(self_ptr self, const std::string& to, const node_view& node) {
  auto& st = self->state;
  wire::outgoing out;
  auto w = out.envelope.initWelcome();
  w.setNodeId(node.record.node_id);
  w.setConfigToml(st.snap.config_toml);
  w.setWorldSize(static_cast<std::uint32_t>(st.cfg.min_workers));
  auto slots = w.initWorkers(static_cast<unsigned>(node.record.workers.size()));
  for (unsigned i = 0; i < node.record.workers.size(); ++i) {
    const auto& view = st.workers[node.record.workers[i]];
    slots[i].setId(view.id);
    slots[i].setRank(view.rank);
    slots[i].setDevice(view.device);
  }
  st.mail->send(to, st.snap.epoch, out);
}

// A Hello naming a known node id: a node that reconnects (after a head restart, or after
// its lease ran out) gets its old slots back.
void on_rejoin(self_ptr self, const wire::message_ptr& msg, node_view& node) {
  auto& st = self->state;
  if (!node.record.public_key.empty() && msg->peer_key() != node.record.public_key) {
    st.mail->refuse(*msg,
                    make_error(errc::sender_conflict, "node " + std::to_string(node.record.node_id) +
                                                          " said Hello with another key; a node keeps its key"),
                    st.snap.epoch);
    return;
  }
  node.record.public_key = msg->peer_key();
  node.batch_job = msg->envelope().getHello().getBatchJob();
  node.last_seen = st.now();
  const bool was_part = takes_part(node.state);
  (void)transition(self, node.record.node_id, member_event::rejoin);  // never refused
  const auto hello = msg->envelope().getHello();
  const bool moved = node.record.data_endpoint != hello.getDataEndpoint().cStr();
  node.record.data_endpoint = hello.getDataEndpoint();  // a restarted node listens on a new port
  if (!was_part || moved) {
    if (!was_part) st.snap.epoch++;
    persist(self);
    publish_routes(self);
    if (!was_part) publish_membership(self);
  }
  watch_lease(self, node.record.node_id);
  send_welcome(self, msg->sender(), node);
}

}  // namespace

void on_hello(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto hello = msg->envelope().getHello();
  // Every worker must train the same model: a node holding another file, or in an external
  // run another signature, takes no part. The first external node's signature is the run's.
  auto model = check_node_model(st.cfg.example, st.cfg.digest, st.snap.model_signature, hello.getModelDigest().cStr(),
                                hello.getModelSignature().cStr());
  if (model.refusal) {
    st.mail->refuse(*msg, model.refusal, st.snap.epoch);
    return;
  }
  if (model.adopt_signature) {
    st.snap.model_signature = hello.getModelSignature().cStr();
    log_info("the run's model is the first node's: " +
             std::to_string(std::count(st.snap.model_signature.begin(), st.snap.model_signature.end(), '\n')) +
             " parameters");
    persist(self);
  }
  auto known = st.nodes.find(hello.getNodeId());
  if (hello.getNodeId() != 0 && known != st.nodes.end()) return on_rejoin(self, msg, known->second);
  // A node repeats its Hello each second until a Welcome comes; a head slow to answer (a
  // thousand nodes joining) must not make it a second node. One still to be admitted gets
  // its Welcome then.
  for (const auto& [id, n] : st.nodes)
    if (!n.provisional_id.empty() && n.provisional_id == msg->sender()) return send_welcome(self, msg->sender(), n);
  for (const auto& pending : st.admitting)
    if (pending.provisional_id == msg->sender()) return;
  if (hello.getDevices().size() == 0) {
    st.mail->refuse(*msg, make_error(errc::invalid_config, "a node needs at least one device"), st.snap.epoch);
    return;
  }
  node_view node;
  node.record.node_id = st.snap.next_node_id++;
  node.record.hostname = hello.getHostname();
  node.record.pid = hello.getPid();
  node.record.can_keep = hello.getCanKeep();
  node.record.data_endpoint = hello.getDataEndpoint();
  node.record.public_key = msg->peer_key();  // from now on its ids speak only with this key
  node.batch_job = hello.getBatchJob();
  node.provisional_id = msg->sender();
  node.last_seen = node.since = st.now();
  std::vector<worker_view> workers;
  const auto devices = hello.getDevices();  // read once: each getter call spends the list's words
  for (unsigned k = 0; k < devices.size(); ++k) {
    worker_view w;
    w.id = worker_id(node.record.node_id, k);
    w.node_id = node.record.node_id;
    w.rank = st.snap.next_rank++ % static_cast<std::uint32_t>(st.cfg.min_workers);
    w.device = devices[k];
    node.record.devices.push_back(w.device);
    node.record.workers.push_back(w.id);
    node.record.ranks.push_back(w.rank);
    workers.push_back(std::move(w));
  }
  if (st.admitting.empty()) self->delayed_send(self, admission_gap, admit_atom::value);
  const auto id = node.record.node_id;
  st.admitting.push_back({id, std::move(node), std::move(workers), msg->sender()});
}

// The nodes that said Hello since the last admission join as one epoch: persisted, then
// welcomed, then published (no one hears of a node before it is on disk).
void admit_new_nodes(self_ptr self) {
  auto& st = self->state;
  if (st.admitting.empty()) return;
  const auto now = std::min(st.admitting.size(), max_admitted_at_once);
  std::vector<registry_state::new_node> admitted(std::make_move_iterator(st.admitting.begin()),
                                                 std::make_move_iterator(st.admitting.begin() + now));
  st.admitting.erase(st.admitting.begin(), st.admitting.begin() + now);
  if (!st.admitting.empty()) self->send(self, admit_atom::value);  // the rest, next
  st.snap.epoch++;
  for (auto& a : admitted) {
    const auto id = a.node.record.node_id;
    for (auto& w : a.workers) st.workers[w.id] = std::move(w);
    st.nodes[id] = std::move(a.node);
    watch_lease(self, id);
  }
  persist(self);
  for (const auto& a : admitted) {
    const auto& n = st.nodes.at(a.id);
    log_info("registry: node " + std::to_string(n.record.node_id) + " (" + n.record.hostname + ") joined with " +
             std::to_string(n.record.workers.size()) + " worker(s); epoch " + std::to_string(st.snap.epoch));
    send_welcome(self, a.provisional_id, n);
  }
  publish_routes(self);
  publish_membership(self);
  update_run_phase(self);
  // Coordinators whose hosts all died while no other node was live (their deaths could
  // place them nowhere) go to the nodes that join now.
  replace_orphaned_coordinators(self);
  place_replica_keepers(self);  // the first node that can keep, mid-run
}

void on_heartbeat(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto hb = msg->envelope().getHeartbeat();
  auto it = st.nodes.find(hb.getNodeId());
  if (it == st.nodes.end()) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "unknown node"), st.snap.epoch);
    return;
  }
  auto& n = it->second;
  // Back after its lease ran out (SIGSTOP, a partition): its places are gone.
  if (auto next = transition(self, it->first, member_event::heartbeat); !next) {
    st.mail->refuse(*msg, make_error(next.err().code, "node " + std::to_string(it->first) + ": " + next.err().message),
                    st.snap.epoch);
    return;
  }
  n.provisional_id.clear();  // it has its id: a Hello from that provisional id is another node's
  mark_synced_if_all_acked(self, it->first);  // its workers may have acknowledged before it was heard
  // The tables sent at its Hello went to node/N before the head knew that id's route (it
  // learns it from this heartbeat): a joining node gets the table again at once.
  if (n.state == member_state::joining) send_whole_routes(self, it->first);
  else check_routes_held(self, it->first, hb.getRoutesEpoch(), hb.getRoutesDigest());
  n.last_seen = st.now();
  // How long the heartbeat waited since it was decoded (a real duration, whatever clock the
  // proxy runs on): the lease counts from its arrival.
  const auto waited = st.deps.lease_from_arrival ? std::chrono::steady_clock::now() - msg->decoded_at()
                                                 : std::chrono::steady_clock::duration::zero();
  if (n.proxy)
    self->send(n.proxy, renew_atom::value,
               static_cast<std::int64_t>(std::chrono::duration_cast<std::chrono::microseconds>(waited).count()));
  n.refused.clear();
  for (auto count : hb.getRefused())
    if (n.refused.size() < traffic_counters::reasons) n.refused.push_back(count);
  n.handshakes_failed = hb.getHandshakesFailed();
  if (hb.getWorkerRestarts() > n.worker_restarts) st.last_worker_restart_at = st.now();
  n.worker_restarts = hb.getWorkerRestarts();
  // Still there after the run finished: the Shutdown sent then was lost, or this node came
  // back (a restarted head, a partition). Each heartbeat gets one until the node stops.
  if (st.phase == run_phase::finished) send_shutdown(self, it->first, run_finished_reason);
}

// A node's connection to the head closed (its process died, or the link dropped and may
// come back): ask it to answer at once; its proxy goes down if it does not within
// cluster.confirm_ms (actors/decisions/liveness.hpp).
void on_link_lost(self_ptr self, const std::string& peer) {
  auto& st = self->state;
  const auto node = node_of(peer);
  if (!node) return;
  auto it = st.nodes.find(*node);
  if (it == st.nodes.end() || !it->second.proxy || st.cfg.confirm_ms <= 0) return;
  self->send(it->second.proxy, suspect_atom::value);
  wire::outgoing out;
  out.envelope.initHeartbeatRequest().setNodeId(*node);
  st.mail->send(peer, st.snap.epoch, out);
  log_info("registry: node " + std::to_string(*node) + "'s connection closed; it has " +
           std::to_string(st.cfg.confirm_ms) + " ms to answer");
}

// A node's proxy went down: its lease ran out (no heartbeat for cluster.lease_ms), or its
// connection closed and it did not answer within cluster.confirm_ms.
void on_proxy_down(self_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  for (auto& [id, n] : st.nodes) {
    if (!n.proxy || n.proxy.address() != down.source) continue;
    n.proxy = nullptr;
    const bool all_done = std::all_of(n.record.workers.begin(), n.record.workers.end(),
                                      [&](const std::string& w) { return st.workers[w].done; });
    const auto next = transition(self, id, all_done ? member_event::lease_expired_done : member_event::lease_expired);
    if (!next) return;  // already gone
    const bool link = down.reason == caf::exit_reason::remote_link_unreachable;
    st.metrics.write("member",
                     {{"node", id}, {"state", to_string(*next)}, {"why", link ? "connection_lost" : "lease_expired"}});
    log_warn("registry: node " + std::to_string(id) +
             (link ? " did not answer within cluster.confirm_ms after its connection closed" : " missed its lease") +
             "; now " + to_string(*next));
    after_membership_change(self);
    return;
  }
}

void on_goodbye(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto bye = msg->envelope().getGoodbye();
  auto it = st.nodes.find(bye.getNodeId());
  if (it == st.nodes.end() || msg->sender() != node_actor_id(bye.getNodeId())) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "goodbye from " + msg->sender()), st.snap.epoch);
    return;
  }
  if (!transition(self, it->first, member_event::goodbye)) return;  // already gone
  log_info("registry: node " + std::to_string(it->first) + " left (" + bye.getReason().cStr() + ")");
  after_membership_change(self);
}

void on_leave_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto req = msg->envelope().getLeaveRequest();
  const auto id = req.getNodeId();
  if (!st.nodes.count(id) || msg->sender() != node_actor_id(id)) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "leave request from " + msg->sender()), st.snap.epoch);
    return;
  }
  if (st.nodes.at(id).state == member_state::draining) return;  // asked again: already leaving
  if (auto err = drain_node(self, id, req.getReason().cStr())) st.mail->refuse(*msg, err, st.snap.epoch);
}

void on_keeper_ready(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto ready = msg->envelope().getKeeperReady();
  // It runs where it is placed: its placement is no longer repeated each tick.
  for (const auto& r : placed_replicas(st))
    if (msg->sender() == keeper_id(r.number)) st.keepers_confirmed[msg->sender()] = r.host;
  std::optional<std::size_t> group;  // whose hand-over's incoming replica it is
  for (std::size_t g = 0; g < keeper_groups(st); ++g) {
    const auto& record = st.snap.keeper_groups[g];
    if (record.incoming_for != 0 && msg->sender() == keeper_id(record.incoming_keeper_number)) group = g;
  }
  if (!group) return;  // not (or no longer) a hand-over's incoming replica: nothing waits on it
  const auto rounds = ready.getRounds();
  const auto held = ready.getHeld();
  if (rounds.size() != st.fragments.size() || held.size() != st.fragments.size()) {
    st.mail->refuse(*msg, make_error(errc::malformed_frame, "keeper_ready: one round per fragment"), st.snap.epoch);
    return;
  }
  // Ready once it holds, for every unit of its group, the round released last: the leaving
  // replica's copy adds nothing then.
  for (const auto f : placement::units_of_group(*group, keeper_groups(st), st.fragments.size())) {
    const auto& view = st.fragments[f];
    if (!view.released_digest && view.round == 0) continue;  // nothing committed that we know of
    if (!held[f] || rounds[f] < view.round) return;
  }
  st.handovers[*group].incoming_ready = true;
  advance_handover(self);
}

// A node whose deltas left a gap asks for the whole table.
void on_peer_table_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto node = msg->envelope().getPeerTableRequest().getNodeId();
  if (msg->sender() != node_actor_id(node) || !st.published_routes.nodes.count(node)) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "no table is published for node " + std::to_string(node)),
                    st.snap.epoch);
    return;
  }
  send_whole_routes(self, node);
}

}  // namespace atl::registry_detail
