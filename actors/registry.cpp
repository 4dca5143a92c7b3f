#include "actors/registry.hpp"

#include <algorithm>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/lease_proxy.hpp"
#include "actors/messages.hpp"
#include "runtime/digest.hpp"
#include "runtime/log.hpp"

namespace atl {
namespace {

using self_ptr = caf::stateful_actor<registry_state>*;
using json = nlohmann::json;
using clock_type = std::chrono::steady_clock;

constexpr const char* head_keeper = "keeper/0";     // in the head, on its run dir
constexpr const char* replica_keeper = "keeper/1";  // on a node with a data dir

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

void persist(self_ptr self) {
  auto& st = self->state;
  st.snap.placements.clear();
  for (const auto& f : st.fragments) st.snap.placements.push_back(f.placed_on);
  st.snap.finished.clear();
  for (const auto& [id, w] : st.workers)
    if (w.done) st.snap.finished.push_back(id);
  st.snap.members.clear();
  for (const auto& [_, n] : st.nodes) st.snap.members.push_back(n.record);
  if (auto err = st.deps.store->save(st.snap)) log_error("registry: cannot persist membership: " + err.describe());
}

std::vector<std::string> live_workers(const registry_state& st) {
  std::vector<std::string> out;
  for (const auto& [_, n] : st.nodes)
    if (n.record.state == "active")
      for (const auto& w : n.record.workers) out.push_back(w);
  std::sort(out.begin(), out.end());
  return out;
}

// Participants a round needs: run.min_workers, until the run's tail. Once a worker has
// finished its steps, the others may be fewer than min_workers and must still finish
// (workers that resynced after a fault are a round or two behind the rest).
std::uint32_t round_quorum(const registry_state& st, std::size_t live) {
  const auto min_workers = static_cast<std::size_t>(st.cfg.min_workers);
  const bool tail = std::any_of(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; });
  return static_cast<std::uint32_t>(tail ? std::max<std::size_t>(1, std::min(min_workers, live)) : min_workers);
}

// The keepers that must acknowledge every commit: the head's, and the replica on a node
// once one is placed.
std::vector<std::string> keepers_of(const registry_state& st) {
  std::vector<std::string> keepers = {head_keeper};
  if (!st.snap.replica_keeper.empty()) keepers.push_back(replica_keeper);
  return keepers;
}

void send_membership(self_ptr self, const std::string& to) {
  auto& st = self->state;
  // Rounds are for workers with steps left: a finished one never contributes again.
  auto workers = live_workers(st);
  workers.erase(std::remove_if(workers.begin(), workers.end(), [&](const std::string& w) { return st.workers[w].done; }),
                workers.end());
  wire::outgoing out;
  auto m = out.envelope.initMembership();
  m.setEpoch(st.snap.epoch);
  auto list = m.initWorkers(static_cast<unsigned>(workers.size()));
  for (unsigned i = 0; i < workers.size(); ++i) list.set(i, workers[i]);
  m.setQuorum(round_quorum(st, workers.size()));
  const auto keepers = keepers_of(st);
  auto keeper_list = m.initKeepers(static_cast<unsigned>(keepers.size()));
  for (unsigned i = 0; i < keepers.size(); ++i) keeper_list.set(i, keepers[i]);
  st.mail->send(to, st.snap.epoch, out);
}

void publish_membership(self_ptr self) {
  auto& st = self->state;
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (!st.fragments[f].placed_on.empty()) send_membership(self, "coord/" + std::to_string(f));
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

// Spreads the coordinators over the live nodes: fragment p to the p-th node (by id).
void place_coordinators(self_ptr self) {
  auto& st = self->state;
  std::vector<std::uint32_t> nodes;
  for (const auto& [id, n] : st.nodes)
    if (n.record.state == "active") nodes.push_back(id);
  if (nodes.empty()) return;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    st.fragments[f].placed_on = "node/" + std::to_string(nodes[f % nodes.size()]);
    st.fragments[f].confirmed = false;
    log_info("registry: coordinator of fragment " + std::to_string(f) + " placed on " + st.fragments[f].placed_on);
  }
  persist(self);  // before anyone hears of it: a restarted head must not place a second one
  send_placements(self);
}

// "node/N" -> N; 0 (no node has it) for anything else, such as a damaged stored placement.
std::uint32_t node_number(const std::string& actor_id) {
  if (actor_id.rfind("node/", 0) != 0 || actor_id.size() < 6 || actor_id.size() > 15) return 0;
  std::uint64_t n = 0;
  for (std::size_t i = 5; i < actor_id.size(); ++i) {
    if (actor_id[i] < '0' || actor_id[i] > '9') return 0;
    n = n * 10 + static_cast<std::uint64_t>(actor_id[i] - '0');
  }
  return n > UINT32_MAX ? 0 : static_cast<std::uint32_t>(n);
}

void send_keeper_placement(self_ptr self) {
  auto& st = self->state;
  if (st.snap.replica_keeper.empty()) return;
  wire::outgoing out;
  auto place = out.envelope.initPlaceKeeper();
  place.setKeeper(replica_keeper);
  place.setSource(head_keeper);
  st.mail->send(st.snap.replica_keeper, st.snap.epoch, out);
}

// Keeper replication: with a node that can keep (`atoll join --run-dir`), keeper/1 runs
// there and every commit needs its acknowledgement as well as the head's, so a round
// acknowledged as committed is on two machines. Placed when training starts or such a
// node joins; placed again on another node when its host is gone (it catches up from the
// head's keeper). Prefers the newest node: node/1 usually hosts coord/0.
void place_replica_keeper(self_ptr self) {
  auto& st = self->state;
  if (st.snap.run_state != "training") return;
  if (!st.snap.replica_keeper.empty()) {
    const auto host = st.nodes.find(node_number(st.snap.replica_keeper));
    if (host != st.nodes.end() && (host->second.record.state == "active" || host->second.record.state == "draining"))
      return;  // still there (a draining host keeps it until its Goodbye)
  }
  std::string chosen;
  for (auto it = st.nodes.rbegin(); it != st.nodes.rend() && chosen.empty(); ++it)
    if (it->second.record.state == "active" && it->second.record.can_keep) chosen = "node/" + std::to_string(it->first);
  if (chosen == st.snap.replica_keeper) return;
  const std::string from = st.snap.replica_keeper;
  st.snap.replica_keeper = chosen;
  persist(self);  // before anyone hears of it
  if (chosen.empty()) log_warn("registry: " + from + " is gone and no live node can keep; commits go to " + head_keeper + " alone");
  else log_info(std::string("registry: ") + replica_keeper + " placed on " + chosen + (from.empty() ? "" : " (was on " + from + ")"));
  send_keeper_placement(self);
  publish_membership(self);  // coordinators commit to the new set of keepers
}

// A coordinator lives on its node: when the node is gone, place it on a live one. The new
// coordinator reloads theta_global and the outer momentum from the keeper and announces
// the committed state, so workers waiting on the old one resync.
void replace_orphaned_coordinators(self_ptr self) {
  auto& st = self->state;
  std::vector<std::uint32_t> live;
  for (const auto& [id, n] : st.nodes)
    if (n.record.state == "active") live.push_back(id);
  if (live.empty() || st.snap.run_state != "training") return;
  bool moved = false;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& view = st.fragments[f];
    if (view.placed_on.empty()) continue;
    const auto host = st.nodes.find(node_number(view.placed_on));
    // A draining node still runs its coordinators until its Goodbye: moving them earlier
    // would run two coordinators of one fragment at once.
    if (host != st.nodes.end() && (host->second.record.state == "active" || host->second.record.state == "draining"))
      continue;
    const std::string from = view.placed_on;
    view.placed_on = "node/" + std::to_string(live[f % live.size()]);
    view.confirmed = false;
    moved = true;
    log_warn("registry: " + from + " is gone; coordinator of fragment " + std::to_string(f) + " re-placed on " +
             view.placed_on);
  }
  if (moved) persist(self);  // before anyone hears of it
  send_placements(self);
}

void set_run_state(self_ptr self, const std::string& state) {
  auto& st = self->state;
  if (st.snap.run_state == state) return;
  log_info("registry: run " + st.snap.run_state + " -> " + state);
  st.snap.run_state = state;
  persist(self);
}

void maybe_start(self_ptr self) {
  auto& st = self->state;
  if (st.snap.run_state == "waiting" && live_workers(st).size() >= static_cast<std::size_t>(st.cfg.min_workers)) {
    set_run_state(self, "training");
    place_coordinators(self);
    place_replica_keeper(self);
  }
}

void maybe_finish(self_ptr self) {
  auto& st = self->state;
  if (st.snap.run_state != "training") return;
  // Finished when no active node has a worker still training, and some worker finished
  // (nodes whose workers finished may already have said goodbye).
  const auto live = live_workers(st);
  for (const auto& w : live)
    if (!st.workers[w].done) return;
  if (std::none_of(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; })) return;
  set_run_state(self, "finished");
  const auto finished = std::count_if(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; });
  json summary = {{"val_loss", st.last_val_loss}, {"wall_s", seconds_since(st.started)}, {"workers", finished}};
  st.metrics.write("summary", summary);
}

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

void watch_lease(self_ptr self, std::uint32_t id);

void on_hello(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto hello = msg->envelope().getHello();
  const auto now = clock_type::now();
  auto known = st.nodes.find(hello.getNodeId());
  if (hello.getNodeId() != 0 && known != st.nodes.end()) {  // a node that reconnects
    known->second.last_seen = now;
    if (known->second.record.state != "active") {
      known->second.record.state = "active";
      known->second.since = now;
      st.snap.epoch++;
      persist(self);
      publish_membership(self);
    }
    watch_lease(self, known->first);
    send_welcome(self, msg->sender(), known->second);
    return;
  }
  if (hello.getDevices().size() == 0) {
    st.mail->refuse(*msg, make_error(errc::invalid_config, "a node needs at least one device"), st.snap.epoch);
    return;
  }
  node_view node;
  node.record.node_id = st.snap.next_node_id++;
  node.record.state = "active";
  node.record.hostname = hello.getHostname();
  node.record.pid = hello.getPid();
  node.record.can_keep = hello.getCanKeep();
  node.last_seen = node.since = now;
  for (unsigned k = 0; k < hello.getDevices().size(); ++k) {
    worker_view w;
    w.id = "worker/" + std::to_string(node.record.node_id) + "." + std::to_string(k);
    w.node_id = node.record.node_id;
    w.rank = st.snap.next_rank++ % static_cast<std::uint32_t>(st.cfg.min_workers);
    w.device = hello.getDevices()[k];
    node.record.devices.push_back(w.device);
    node.record.workers.push_back(w.id);
    node.record.ranks.push_back(w.rank);
    st.workers[w.id] = w;
  }
  st.snap.epoch++;
  const auto id = node.record.node_id;
  st.nodes[id] = node;
  watch_lease(self, id);
  persist(self);
  log_info("registry: node " + std::to_string(id) + " (" + node.record.hostname + ") joined with " +
           std::to_string(node.record.workers.size()) + " worker(s); epoch " + std::to_string(st.snap.epoch));
  send_welcome(self, msg->sender(), st.nodes[id]);
  publish_membership(self);
  maybe_start(self);
  place_replica_keeper(self);  // the first node that can keep, mid-run
}

// Member states: active -> draining (atoll leave) -> left (Goodbye or lease), or
// active -> dead (lease expired with work unfinished). Only active members' workers take
// part in rounds. A gone node's proxy is stopped, and its ids (its coordinators above all)
// may move to another connection now.
void set_member_state(self_ptr self, std::uint32_t id, const std::string& state) {
  auto& st = self->state;
  auto& n = st.nodes.at(id);
  n.record.state = state;
  n.since = clock_type::now();
  if (state != "left" && state != "dead") return;
  st.deps.net->forget_peer("node/" + std::to_string(id));
  if (n.proxy) {
    self->demonitor(n.proxy);
    self->send_exit(n.proxy, caf::exit_reason::user_shutdown);
    n.proxy = nullptr;
  }
}

// A live node is represented here by a lease proxy (actors/lease_proxy.hpp): heartbeats
// renew it, and its down message is how the registry learns the lease ran out.
void watch_lease(self_ptr self, std::uint32_t id) {
  auto& n = self->state.nodes.at(id);
  if (n.proxy) return;
  n.proxy = self->spawn(lease_proxy, "node/" + std::to_string(id), std::chrono::milliseconds(self->state.cfg.lease_ms));
  self->monitor(n.proxy);
}

// Every change of who takes part: a new epoch, persisted and published, coordinators of
// gone nodes re-placed, and the run finished if only finished workers are left.
void after_membership_change(self_ptr self) {
  auto& st = self->state;
  st.snap.epoch++;
  persist(self);
  replace_orphaned_coordinators(self);
  place_replica_keeper(self);
  publish_membership(self);
  maybe_finish(self);
}

// A node's proxy went down: its lease ran out (no heartbeat for cluster.lease_ms).
void on_proxy_down(self_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  for (auto& [id, n] : st.nodes) {
    if (!n.proxy || n.proxy.address() != down.source) continue;
    n.proxy = nullptr;
    const bool draining = n.record.state == "draining";
    if (n.record.state != "active" && !draining) return;
    bool all_done = true;
    for (const auto& w : n.record.workers) all_done = all_done && st.workers[w].done;
    set_member_state(self, id, all_done || draining ? "left" : "dead");
    log_warn("registry: node " + std::to_string(id) + " missed its lease; now " + n.record.state);
    after_membership_change(self);
    return;
  }
}

void on_goodbye(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto bye = msg->envelope().getGoodbye();
  auto it = st.nodes.find(bye.getNodeId());
  if (it == st.nodes.end() || msg->sender() != "node/" + std::to_string(bye.getNodeId())) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "goodbye from " + msg->sender()), st.snap.epoch);
    return;
  }
  if (it->second.record.state != "active" && it->second.record.state != "draining") return;  // already gone
  set_member_state(self, it->first, "left");
  log_info("registry: node " + std::to_string(it->first) + " left (" + bye.getReason().cStr() + ")");
  after_membership_change(self);
}

// `atoll leave N`: node N's workers stop taking part now; the node is told to stop and
// says goodbye. Returns the reply body, or an error naming the problem.
expected<json> start_leave(self_ptr self, const std::string& argument) {
  auto& st = self->state;
  std::uint32_t id = 0;
  try {
    std::size_t used = 0;
    id = static_cast<std::uint32_t>(std::stoul(argument, &used));
    if (used != argument.size()) throw std::invalid_argument(argument);
  } catch (const std::exception&) {
    return make_error(errc::invalid_config, "leave: '" + argument + "' is not a node id (see atollctl members)");
  }
  auto it = st.nodes.find(id);
  if (it == st.nodes.end()) return make_error(errc::unknown_peer, "leave: no node " + argument);
  if (it->second.record.state != "active")
    return make_error(errc::not_ready, "leave: node " + argument + " is " + it->second.record.state);
  set_member_state(self, id, "draining");
  log_info("registry: node " + argument + " is draining (atoll leave)");
  after_membership_change(self);
  wire::outgoing bye;
  bye.envelope.initShutdown().setReason("atoll leave");
  st.mail->send("node/" + argument, st.snap.epoch, bye);
  return json{{"node_id", id}, {"state", "draining"}};
}

// The state `atollctl members` shows, and since when: an active node is joining (no
// heartbeat since its Welcome yet), then syncing (its workers fetch the committed state
// and wait for their first round), then active.
std::pair<std::string, clock_type::time_point> shown_state(const registry_state& st, const node_view& n) {
  if (n.record.state != "active") return {n.record.state, n.since};
  if (!n.heard) return {"joining", n.since};
  if (n.synced_at) return {"active", *n.synced_at};
  return {st.snap.run_state == "training" ? "syncing" : "active", n.since};
}

json members_json(const registry_state& st) {
  json out = json::array();
  for (const auto& [id, n] : st.nodes) {
    const auto [state, since] = shown_state(st, n);
    out.push_back({{"node_id", id},
                   {"state", state},
                   {"since_s", seconds_since(since)},
                   {"last_heartbeat_s", seconds_since(n.last_seen)},
                   {"hostname", n.record.hostname},
                   {"pid", n.record.pid},
                   {"devices", n.record.devices},
                   {"workers", n.record.workers}});
  }
  return out;
}

// A node is synced once each of its workers has merged a round result.
void mark_synced_if_all_acked(registry_state& st, std::uint32_t node_id) {
  auto node = st.nodes.find(node_id);
  if (node == st.nodes.end() || node->second.synced_at) return;
  for (const auto& w : node->second.record.workers)
    if (st.workers[w].rounds_acked == 0) return;
  node->second.synced_at = clock_type::now();
}

json workers_json(const registry_state& st) {
  json out = json::array();
  for (const auto& [id, w] : st.workers)
    out.push_back({{"id", id},
                   {"node_id", w.node_id},
                   {"rank", w.rank},
                   {"device", w.device},
                   {"step", w.step},
                   {"loss", w.loss},
                   {"tokens_per_s", w.tokens_per_s},
                   {"bytes_sent", w.bytes_sent},
                   {"bytes_received", w.bytes_received},
                   {"done", w.done},
                   {"wall_s", w.wall_s},
                   {"wait_s", w.wait_s}});
  return out;
}

json fragments_json(const registry_state& st, bool with_keeper) {
  json out = json::array();
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    const auto& view = st.fragments[f];
    json entry = {{"id", f},
                  {"round", view.round},
                  {"coordinator", "coord/" + std::to_string(f)},
                  {"placed_on", view.placed_on.empty() ? json() : json(view.placed_on)}};
    if (with_keeper) {
      json workers = json::array();
      for (const auto& [w, rd] : view.worker_digests)
        workers.push_back({{"id", w}, {"round", rd.first}, {"digest", digest_hex(rd.second)}});
      entry["workers"] = workers;
      entry["keeper"] = "keeper/0";
      auto cp = st.deps.checkpoints->latest(static_cast<std::uint32_t>(f));
      if (cp && *cp) {
        const auto& theta = (*cp)->theta;
        entry["round"] = (*cp)->round;
        entry["keeper_round"] = (*cp)->round;
        entry["keeper_digest"] = digest_hex(digest64(theta.data(), theta.size() * sizeof(float)));
      } else if (!cp) {
        entry["keeper_error"] = cp.err().describe();
      }
    }
    out.push_back(entry);
  }
  return out;
}

// Refusals by reason: {"head": {...}, "node/1": {...}, "total": {...}}, from the head's
// counters and each node's last heartbeat.
json refusals_json(const registry_state& st) {
  json out = json::object(), total = json::object();
  const auto add = [&](const std::string& process, std::size_t code, std::uint64_t count) {
    if (code == 0 || count == 0) return;
    const std::string reason = to_string(static_cast<errc>(code));
    out[process][reason] = count;
    total[reason] = total.value(reason, std::uint64_t{0}) + count;
  };
  if (st.deps.counters)
    for (std::size_t i = 0; i < st.deps.counters->refused.size(); ++i) add("head", i, st.deps.counters->refused[i].load());
  for (const auto& [id, n] : st.nodes)
    for (std::size_t i = 0; i < n.refused.size(); ++i) add("node/" + std::to_string(id), i, n.refused[i]);
  out["total"] = total;
  return out;
}

json storage_json(const registry_state& st) {
  if (!st.deps.checkpoints) return json::object();
  const auto h = st.deps.checkpoints->health();
  return {{"ok", !h.failing}, {"failed_commits", h.failed_commits}, {"last_error", h.last_error}};
}

json security_json(const registry_state& st) {
  json out = {{"curve", st.deps.secure}};
  if (!st.deps.counters) return out;
  std::uint64_t node_handshakes = 0;
  for (const auto& [id, n] : st.nodes) node_handshakes += n.handshakes_failed;
  out["auth_admitted"] = st.deps.counters->auth_admitted.load();
  out["auth_denied"] = st.deps.counters->auth_denied.load();
  out["handshakes_failed"] = st.deps.counters->handshakes_failed.load() + node_handshakes;
  return out;
}

// Where each keeper runs: the head's, and the replica's node.
json keepers_json(const registry_state& st) {
  json out = json::array({{{"id", head_keeper}, {"on", "head"}}});
  if (!st.snap.replica_keeper.empty()) out.push_back({{"id", replica_keeper}, {"on", st.snap.replica_keeper}});
  return out;
}

json status_json(const registry_state& st) {
  json members = json::array();
  for (const auto& [id, n] : st.nodes)
    members.push_back({{"node_id", id}, {"state", n.record.state}, {"workers", n.record.workers}});
  return {{"cluster_id", st.snap.cluster_id},
          {"epoch", st.snap.epoch},
          {"state", st.snap.run_state},
          {"example", st.cfg.example},
          {"steps", st.cfg.steps},
          {"head", st.deps.listen_endpoint},
          {"uptime_s", seconds_since(st.started)},
          {"members", members},
          {"workers", workers_json(st)},
          {"fragments", fragments_json(st, false)},
          {"keepers", keepers_json(st)},
          {"last_eval", {{"step", st.last_eval_step}, {"val_loss", st.last_val_loss}}},
          {"refused", refusals_json(st)},
          {"security", security_json(st)},
          {"storage", storage_json(st)}};
}

void on_control(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const std::string command = msg->envelope().getControlRequest().getCommand();
  json body;
  bool ok = true;
  if (command == "status") body = status_json(st);
  else if (command == "members") body = members_json(st);
  else if (command == "fragments") body = fragments_json(st, true);
  else if (command == "actors") {
    body = json::array();
    for (const auto& id : st.deps.local_actors->ids()) body.push_back({{"id", id}, {"process", "head"}, {"state", "running"}});
    for (std::size_t f = 0; f < st.fragments.size(); ++f)
      if (!st.fragments[f].placed_on.empty())
        body.push_back({{"id", "coord/" + std::to_string(f)}, {"process", st.fragments[f].placed_on}, {"state", "placed"}});
    if (!st.snap.replica_keeper.empty())
      body.push_back({{"id", replica_keeper}, {"process", st.snap.replica_keeper}, {"state", "placed"}});
    for (const auto& [id, n] : st.nodes) {
      body.push_back({{"id", "node/" + std::to_string(id)}, {"process", n.record.hostname + ":" + std::to_string(n.record.pid)}, {"state", n.record.state}});
      for (const auto& w : n.record.workers)
        body.push_back({{"id", w}, {"process", n.record.hostname + ":" + std::to_string(n.record.pid)},
                        {"state", st.workers[w].done ? "done" : n.record.state}});
    }
  } else if (command == "checkpoints") {
    auto list = st.deps.checkpoints->list();
    if (!list) {
      ok = false;
      body = {{"error", list.err().describe()}};
    } else {
      body = json::array();
      for (const auto& c : *list)
        body.push_back({{"fragment", c.fragment}, {"round", c.round}, {"epoch", c.epoch},
                        {"digest", digest_hex(c.digest)}, {"params", c.params}});
    }
  } else if (command == "down") {
    body = {{"stopping", true}};
  } else if (command == "leave") {
    auto left = start_leave(self, msg->envelope().getControlRequest().getArgument());
    ok = static_cast<bool>(left);
    body = left ? *left : json{{"error", left.err().describe()}};
  } else {
    ok = false;
    body = {{"error", "unknown command '" + command + "'"}};
  }
  wire::outgoing out;
  auto reply = out.envelope.initControlReply();
  reply.setOk(ok);
  reply.setJson(body.dump());
  st.mail->send(msg->sender(), st.snap.epoch, out);
  if (command == "down") {
    for (const auto& [id, n] : st.nodes) {
      if (n.record.state != "active") continue;
      wire::outgoing bye;
      bye.envelope.initShutdown().setReason("atoll down");
      st.mail->send("node/" + std::to_string(id), st.snap.epoch, bye);
    }
    log_info("registry: shutting down on request");
    self->delayed_send(self, std::chrono::milliseconds(300), stop_atom::value);  // let replies flush
  }
}

void on_report(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto env = msg->envelope();
  auto it = st.workers.find(msg->sender());
  if (it == st.workers.end()) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, msg->sender() + " is not a registered worker"), st.snap.epoch);
    return;
  }
  auto& w = it->second;
  if (env.isRoundAck()) {
    const auto ack = env.getRoundAck();
    if (ack.getFragment() >= st.fragments.size()) return;
    st.fragments[ack.getFragment()].worker_digests[w.id] = {ack.getRound(), ack.getDigest()};
    w.rounds_acked++;
    mark_synced_if_all_acked(st, w.node_id);
    st.metrics.write("ack", {{"fragment", ack.getFragment()}, {"round", ack.getRound()}, {"worker", w.id},
                             {"digest", digest_hex(ack.getDigest())}});
  } else if (env.isProgress()) {
    const auto p = env.getProgress();
    w.step = p.getStep();
    w.loss = p.getLoss();
    w.tokens_per_s = p.getTokensPerSec();
    w.bytes_sent = p.getBytesSent();
    w.bytes_received = p.getBytesReceived();
    w.wait_s = p.getWaitSeconds();
    st.metrics.write("step", {{"worker", w.id}, {"step", w.step}, {"loss", w.loss}, {"tokens_per_s", w.tokens_per_s},
                              {"bytes_sent", w.bytes_sent}, {"bytes_received", w.bytes_received}, {"wait_s", w.wait_s}});
  } else if (env.isEvalReport()) {
    const auto e = env.getEvalReport();
    st.last_eval_step = static_cast<std::int64_t>(e.getStep());
    st.last_val_loss = e.getValLoss();
    st.metrics.write("eval", {{"worker", w.id}, {"step", e.getStep()}, {"val_loss", e.getValLoss()}});
    log_info("registry: step " + std::to_string(e.getStep()) + " held-out loss " + std::to_string(e.getValLoss()));
  } else if (env.isWorkerDone()) {
    const auto d = env.getWorkerDone();
    w.done = true;
    w.step = d.getSteps();
    w.loss = d.getFinalLoss();
    w.tokens_per_s = d.getTokensPerSec();
    w.bytes_sent = d.getBytesSent();
    w.bytes_received = d.getBytesReceived();
    w.wall_s = d.getWallSeconds();
    w.wait_s = d.getWaitSeconds();
    if (d.getValLoss() >= 0) {
      w.final_val_loss = d.getValLoss();
      st.last_val_loss = d.getValLoss();
      st.last_eval_step = static_cast<std::int64_t>(d.getSteps());
      st.metrics.write("eval", {{"worker", w.id}, {"step", d.getSteps()}, {"val_loss", d.getValLoss()}});
    }
    st.metrics.write("worker_done", {{"worker", w.id}, {"steps", w.step}, {"loss", w.loss},
                                     {"tokens_per_s", w.tokens_per_s}, {"bytes_sent", w.bytes_sent},
                                     {"bytes_received", w.bytes_received}, {"wall_s", w.wall_s},
                                     {"wait_s", w.wait_s},
                                     {"compute_utilisation", w.wall_s > 0 ? 1.0 - w.wait_s / w.wall_s : 0.0}});
    log_info("registry: " + w.id + " finished " + std::to_string(w.step) + " steps");
    persist(self);             // a restarted head must not wait for it either
    publish_membership(self);  // no round waits for it, and the quorum may shrink
    maybe_finish(self);
  }
}

void on_round_report(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto r = msg->envelope().getRoundReport();
  if (r.getFragment() >= st.fragments.size() || msg->sender() != "coord/" + std::to_string(r.getFragment())) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "round report from " + msg->sender()), st.snap.epoch);
    return;
  }
  auto& view = st.fragments[r.getFragment()];
  view.round = r.getRound();
  view.digest = r.getDigest();
  json names = json::array();
  for (auto p : r.getParticipants()) names.push_back(std::string(p.cStr()));
  st.metrics.write("round", {{"fragment", r.getFragment()}, {"round", r.getRound()}, {"epoch", r.getEpoch()},
                             {"participants", r.getParticipants().size()}, {"workers", names},
                             {"duration_s", r.getDurationS()},
                             {"bytes", r.getBytes()}, {"digest", digest_hex(r.getDigest())}});
}

}  // namespace

caf::behavior registry_actor(caf::stateful_actor<registry_state>* self, registry_deps deps, registry_snapshot snap) {
  auto& st = self->state;
  st.deps = deps;
  st.snap = std::move(snap);
  st.mail = std::make_unique<mailer>(*deps.net, "registry", st.snap.cluster_id);
  auto cfg = parse_config_text(st.snap.config_toml, "stored config");
  if (cfg) st.cfg = *cfg;
  else log_error("registry: " + cfg.err().describe());
  st.fragments.resize(static_cast<std::size_t>(st.cfg.fragments));
  if (!deps.metrics_path.empty()) st.metrics = metrics_writer(deps.metrics_path);
  const auto now = clock_type::now();
  for (const auto& m : st.snap.members) {  // a restarted head: members must heartbeat again
    node_view n;
    n.record = m;
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
    auto cp = deps.checkpoints->latest(static_cast<std::uint32_t>(f));
    if (cp && *cp) st.fragments[f].round = (*cp)->round;
    // Placed before the restart: confirmed again by the coordinator's MembershipRequest
    // (its node is told again every tick until then).
    if (f < st.snap.placements.size()) st.fragments[f].placed_on = st.snap.placements[f];
  }
  self->set_down_handler([=](caf::down_msg& down) { on_proxy_down(self, down); });
  for (const auto& [id, n] : st.nodes)  // a restarted head gives each live node a full lease
    if (n.record.state == "active" || n.record.state == "draining") watch_lease(self, id);
  replace_orphaned_coordinators(self);  // hosts that left or died before the restart
  place_replica_keeper(self);
  self->delayed_send(self, std::chrono::milliseconds(st.cfg.heartbeat_ms), tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        const auto env = msg->envelope();
        if (env.isHello()) on_hello(self, msg);
        else if (env.isHeartbeat()) {
          auto it = st.nodes.find(env.getHeartbeat().getNodeId());
          if (it == st.nodes.end()) {
            st.mail->refuse(*msg, make_error(errc::unknown_peer, "unknown node"), st.snap.epoch);
            return;
          }
          if (it->second.record.state == "dead" || it->second.record.state == "left") {
            // Back after its lease ran out (SIGSTOP, a partition): its places are gone.
            st.mail->refuse(*msg, make_error(errc::stale_epoch, "node " + std::to_string(it->first) + " is " +
                                                                   it->second.record.state + "; register again"),
                            st.snap.epoch);
            return;
          }
          it->second.last_seen = clock_type::now();
          it->second.heard = true;
          if (it->second.proxy) self->send(it->second.proxy, renew_atom::value);
          const auto hb = env.getHeartbeat();
          auto& refused = it->second.refused;
          refused.clear();
          for (auto count : hb.getRefused())
            if (refused.size() < traffic_counters::reasons) refused.push_back(count);
          it->second.handshakes_failed = hb.getHandshakesFailed();
        } else if (env.isControlRequest()) on_control(self, msg);
        else if (env.isProgress() || env.isEvalReport() || env.isWorkerDone() || env.isRoundAck()) on_report(self, msg);
        else if (env.isRoundReport()) on_round_report(self, msg);
        else if (env.isGoodbye()) on_goodbye(self, msg);
        else if (env.isMembershipRequest()) {
          const auto f = env.getMembershipRequest().getFragment();
          if (f < st.fragments.size() && msg->sender() == "coord/" + std::to_string(f)) st.fragments[f].confirmed = true;
          send_membership(self, msg->sender());
        }
        else if (env.isRefusal()) log_warn("registry: refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
        else st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.snap.epoch);
      },
      [=](tick_atom) {
        send_placements(self);
        send_keeper_placement(self);  // repeated until it runs there (a repeat is ignored)
        publish_membership(self);  // again each tick: one lost with a dropped link is repaired
        self->delayed_send(self, std::chrono::milliseconds(self->state.cfg.heartbeat_ms), tick_atom::value);
      },
      [=](stop_atom) { self->quit(); },
  };
}

}  // namespace atl
