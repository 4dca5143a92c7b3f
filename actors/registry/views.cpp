#include "actors/registry/views.hpp"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "actors/decisions/member_query.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/decisions/run_conditions.hpp"
#include "actors/registry/queries.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"
#include "storage/checkpoint_rounds.hpp"

namespace atl::views {
namespace {

double seconds_between(time_point from, time_point to) { return std::chrono::duration<double>(to - from).count(); }

json workers(const registry_state& st) {
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
                   {"wait_s", w.wait_s},
                   {"threads", w.threads}});
  return out;
}

// Refusals by reason: {"head": {...}, "node/1": {...}, "total": {...}}, from the head's
// counters and each node's last heartbeat.
json refusals(const registry_state& st) {
  json out = json::object(), total = json::object();
  const auto add = [&](const std::string& process, std::size_t code, std::uint64_t count) {
    if (code == 0 || count == 0) return;
    const std::string reason = to_string(static_cast<errc>(code));
    out[process][reason] = count;
    total[reason] = total.value(reason, std::uint64_t{0}) + count;
  };
  if (st.deps.counters)
    for (std::size_t i = 0; i < st.deps.counters->refused.size(); ++i)
      add("head", i, st.deps.counters->refused[i].load());
  for (const auto& [id, n] : st.nodes)
    for (std::size_t i = 0; i < n.refused.size(); ++i) add(node_actor_id(id), i, n.refused[i]);
  out["total"] = total;
  return out;
}

// The registry's own saves (storage/registry_store.hpp): one a membership epoch.
json registry_writes(const registry_state& st) {
  if (!st.deps.store) return json::object();
  const auto w = st.deps.store->written();
  return {{"saves", w.saves}, {"members", w.members}, {"bytes", w.bytes}};
}

json storage(const registry_state& st) {
  if (!st.deps.checkpoints) return json::object();
  const auto h = st.deps.checkpoints->health();
  json out = {{"ok", !h.failing},
              {"failed_commits", h.failed_commits},
              {"last_error", h.last_error},
              {"logged_bytes", h.logged_bytes},
              {"logged_records", h.logged_records},
              {"replay_mismatches", h.replay_mismatches}};
  // What the head's keeper holds: snapshots, round records and their bytes (bounded by
  // storage.keep_rounds and storage.snapshot_every).
  if (auto use = st.deps.checkpoints->storage_use()) {
    std::uint64_t snapshots = 0, records = 0, bytes = 0;
    for (const auto& f : *use) {
      snapshots += f.snapshots;
      records += f.log_records;
      bytes += f.bytes;
    }
    out["snapshots"] = snapshots;
    out["log_records"] = records;
    out["stored_bytes"] = bytes;
  }
  return out;
}

json round_durations(const registry_state& st) {
  const auto& h = st.round_durations;
  return {{"le", h.bounds}, {"at_most", h.at_most}, {"count", h.count}, {"sum", h.sum}};
}

json security(const registry_state& st) {
  json out = {{"curve", st.deps.secure}};
  if (!st.deps.counters) return out;
  std::uint64_t node_handshakes = 0;
  for (const auto& [id, n] : st.nodes) node_handshakes += n.handshakes_failed;
  out["auth_admitted"] = st.deps.counters->auth_admitted.load();
  out["auth_denied"] = st.deps.counters->auth_denied.load();
  out["handshakes_failed"] = st.deps.counters->handshakes_failed.load() + node_handshakes;
  return out;
}

}  // namespace

json head_link_by_kind(const traffic_counters& c) {
  json kinds = json::object();
  for (std::size_t k = 0; k < traffic_counters::kinds; ++k) {
    const auto in = c.kind_bytes_in[k].load(), out = c.kind_bytes_out[k].load();
    if (in + out > 0)
      kinds[wire::kind_name(static_cast<schema::Envelope::Which>(k))] = {
          {"in", in},
          {"out", out},
          {"largest_envelope_in", c.kind_largest_envelope_in[k].load()},
          {"largest_envelope_out", c.kind_largest_envelope_out[k].load()}};
  }
  return kinds;
}

namespace {

// The head's own link: bytes its actors received and sent, of which tensor frames (the
// commits to keeper/0 and its loads; zero with storage.keepers = nodes while both replicas
// run), and bytes it relayed between nodes, of which tensor frames (those of nodes that do
// not listen; zero when all listen).
json head_link(const registry_state& st) {
  if (!st.deps.counters) return json::object();
  const auto& c = *st.deps.counters;
  return {{"bytes_in", c.bytes_in.load()},
          {"bytes_out", c.bytes_out.load()},
          {"tensor_bytes_in", c.tensor_bytes_in.load()},
          {"tensor_bytes_out", c.tensor_bytes_out.load()},
          {"bytes_relayed", c.bytes_relayed.load()},
          {"tensor_bytes_relayed", c.tensor_bytes_relayed.load()},
          {"by_kind", head_link_by_kind(c)}};
}

// Where each keeper runs (the head's, the replicas' nodes), and whether commits wait for it
// (with storage.keepers = nodes the head's keeper does not while both replicas of every
// group run); with keeper groups, each replica's group and the units it keeps.
json keepers(const registry_state& st) {
  const auto head = keeper_id(head_keeper_number);
  json out = json::array({{{"id", head}, {"on", "head"}, {"commits", registry_detail::commits_to(st, head)}}});
  const auto groups = registry_detail::keeper_groups(st);
  for (const auto& r : registry_detail::placed_replicas(st)) {
    const auto id = keeper_id(r.number);
    json entry = {{"id", id}, {"on", r.host}, {"commits", registry_detail::commits_to(st, id)}};
    if (groups > 1) {
      entry["group"] = r.group;
      entry["units"] = placement::units_of_group(r.group, groups, st.fragments.size());
    }
    out.push_back(entry);
  }
  return out;
}

}  // namespace

const char* shown_state(const registry_state& st, const node_view& n) {
  if (n.state == member_state::syncing && st.phase != run_phase::training) return to_string(member_state::active);
  return to_string(n.state);
}

json members(const registry_state& st, time_point now) {
  auto all = members(st, now, "");
  return all ? *all : json::array();
}

expected<json> members(const registry_state& st, time_point now, const std::string& query) {
  const auto q = parse_member_query(query);
  if (!q) return q.err();
  json out = json::array();
  std::size_t index = 0;  // among the members the state filter passes
  for (const auto& [id, n] : st.nodes) {
    if (q->state && *q->state != shown_state(st, n)) continue;
    if (!on_page(*q, index++)) continue;
    out.push_back({{"node_id", id},
                   {"state", shown_state(st, n)},
                   {"since_s", seconds_between(n.since, now)},
                   {"last_heartbeat_s", seconds_between(n.last_seen, now)},
                   {"hostname", n.record.hostname},
                   {"pid", n.record.pid},
                   {"batch_job", n.batch_job},
                   {"link", n.record.data_endpoint.empty() ? "relayed" : "direct"},
                   {"data_endpoint", n.record.data_endpoint},
                   {"devices", n.record.devices},
                   {"workers", n.record.workers},
                   {"worker_restarts", n.worker_restarts}});
  }
  return out;
}

namespace {

// The head keeper's latest round of fragment f and the digest of its values, read from
// the store only when the round changed (fragment_view::keeper_digest).
expected<std::optional<std::pair<std::uint64_t, std::uint64_t>>> keeper_latest(const registry_state& st,
                                                                               std::uint32_t f) {
  using answer = std::optional<std::pair<std::uint64_t, std::uint64_t>>;
  auto round = st.deps.checkpoints->latest_round(f);
  if (!round) return round.err();
  if (!*round) return answer{};
  auto& cache = st.fragments[f].keeper_digest;
  if (cache && cache->first == **round) return answer{*cache};
  auto cp = st.deps.checkpoints->load(f, **round);
  if (!cp) return cp.err();
  if (!*cp) return answer{};  // pruned between the two reads: the next ask finds the newer one
  const auto& theta = (*cp)->theta;
  cache = std::make_pair(**round, digest64(theta.data(), theta.size() * sizeof(float)));
  return answer{*cache};
}

}  // namespace

json fragments(const registry_state& st, bool with_keeper) {
  json out = json::array();
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    const auto& view = st.fragments[f];
    json entry = {{"id", f},
                  {"round", view.round},
                  {"coordinator", coordinator_id(static_cast<std::uint32_t>(f))},
                  {"placed_on", view.placed_on.empty() ? json() : json(view.placed_on)}};
    if (shards_of(st.cfg) > 1) {  // a sync unit: slice f mod S of fragment f / S (diloco.shards)
      const auto shards = static_cast<std::size_t>(shards_of(st.cfg));
      entry["fragment"] = f / shards;
      entry["slice"] = f % shards;
      entry["shards"] = shards;
    }
    if (with_keeper) {
      json workers = json::array();  // at most status_rows: the reply stays far below the envelope cap
      for (const auto& [w, rd] : view.worker_digests) {
        if (workers.size() == status_rows) break;
        workers.push_back({{"id", w}, {"round", rd.first}, {"digest", digest_hex(rd.second)}});
      }
      entry["workers"] = workers;
      entry["workers_total"] = view.worker_digests.size();
      const auto head = keeper_id(head_keeper_number);
      if (st.cfg.keepers == "nodes" && view.released_digest) {
        // The head's store may be behind (it takes commits only while standing in for a
        // replica): the last released round, with the digest every commit keeper acknowledged.
        entry["keeper"] = "replicas";
        entry["round"] = view.released_digest->first;
        entry["keeper_round"] = view.released_digest->first;
        entry["keeper_digest"] = digest_hex(view.released_digest->second);
        out.push_back(entry);
        continue;
      }
      entry["keeper"] = head;
      auto keeper = keeper_latest(st, static_cast<std::uint32_t>(f));
      if (keeper && *keeper) {
        entry["round"] = (*keeper)->first;
        entry["keeper_round"] = (*keeper)->first;
        entry["keeper_digest"] = digest_hex((*keeper)->second);
      } else if (!keeper) {
        entry["keeper_error"] = keeper.err().describe();
      }
    }
    out.push_back(entry);
  }
  return out;
}

json actors(const registry_state& st) {
  json out = json::array();
  for (const auto& id : st.deps.local_actors->ids())
    out.push_back({{"id", id}, {"process", "head"}, {"state", "running"}});
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (!st.fragments[f].placed_on.empty())
      out.push_back({{"id", coordinator_id(static_cast<std::uint32_t>(f))},
                     {"process", st.fragments[f].placed_on},
                     {"state", "placed"}});
  for (const auto& r : registry_detail::placed_replicas(st))
    out.push_back({{"id", keeper_id(r.number)}, {"process", r.host}, {"state", "placed"}});
  for (const auto& [id, n] : st.nodes) {
    const std::string process = n.record.hostname + ":" + std::to_string(n.record.pid);
    const std::string state = stored_member_state(n.state);
    out.push_back({{"id", node_actor_id(id)}, {"process", process}, {"state", state}});
    for (const auto& w : n.record.workers) {
      const auto view = st.workers.find(w);
      const bool done = view != st.workers.end() && view->second.done;
      out.push_back({{"id", w}, {"process", process}, {"state", done ? "done" : state}});
    }
  }
  return out;
}

// Every stored (fragment, round), with what `atoll export` makes of it
// (storage/checkpoint_rounds.hpp): `round_complete` when every fragment holds the round
// (`atoll export --round N` writes it), `latest` when plain `atoll export` takes it.
expected<json> checkpoints(const registry_state& st) {
  auto list = st.deps.checkpoints->list();
  if (!list) return list.err();
  const auto fragment_count = static_cast<std::size_t>(sync_units(st.cfg));
  std::set<std::uint64_t> complete;
  for (const auto& r : rounds_by_number(*list, fragment_count))
    if (r.complete) complete.insert(r.round);
  std::set<std::pair<std::uint32_t, std::uint64_t>> latest;
  if (auto chosen = choose_export(*list, fragment_count, std::nullopt))
    for (const auto& c : *chosen) latest.insert({c.fragment, c.round});
  json out = json::array();
  for (const auto& c : *list)
    out.push_back({{"fragment", c.fragment},
                   {"round", c.round},
                   {"epoch", c.epoch},
                   {"digest", digest_hex(c.digest)},
                   {"params", c.params},
                   {"round_complete", complete.count(c.round) > 0},
                   {"latest", latest.count({c.fragment, c.round}) > 0}});
  return out;
}

namespace {

explain_input explain_facts(const registry_state& st, time_point now, std::uint32_t f) {
  const auto& frag = st.fragments[f];
  explain_input in;
  in.fragment = f;
  in.coordinator_on = frag.placed_on;
  in.lease_s = static_cast<double>(st.cfg.lease_ms) / 1000.0;
  in.round_deadline_s = static_cast<double>(st.cfg.round_deadline_ms) / 1000.0;
  in.adaptive_close = st.cfg.round_close == "adaptive";
  in.quorum =
      quorum::required_participants(static_cast<std::size_t>(st.cfg.min_workers),
                                    registry_detail::live_workers(st).size(), registry_detail::any_worker_done(st));
  in.stale_after_s = std::max(3.0, 3.0 * static_cast<double>(st.cfg.heartbeat_ms) / 1000.0);
  for (const auto& [id, n] : st.nodes)
    if (node_actor_id(id) == frag.placed_on) {
      in.coordinator_node_state = shown_state(st, n);
      in.coordinator_heartbeat_s = seconds_between(n.last_seen, now);
    }
  if (frag.progress) {
    in.progress = frag.progress;
    in.progress_age_s = seconds_between(frag.progress_at, now);
  }
  for (const auto& [id, w] : st.workers) {
    participant_facts p;
    p.worker = id;
    p.node_id = w.node_id;
    p.step = w.step;
    p.done = w.done;
    auto node = st.nodes.find(w.node_id);
    p.node_state = node == st.nodes.end() ? "unknown" : shown_state(st, node->second);
    if (node != st.nodes.end()) p.last_heartbeat_s = seconds_between(node->second.last_seen, now);
    in.facts.push_back(p);
  }
  return in;
}

json to_json(const participant_facts& p) {
  return {
      {"id", p.worker}, {"node_id", p.node_id}, {"node_state", p.node_state}, {"last_heartbeat_s", p.last_heartbeat_s},
      {"step", p.step}, {"done", p.done}};
}

}  // namespace

expected<json> explain(const registry_state& st, time_point now, const std::string& fragment) {
  std::vector<std::uint32_t> which;
  if (fragment.empty()) {
    for (std::uint32_t f = 0; f < st.fragments.size(); ++f) which.push_back(f);
  } else {
    char* end = nullptr;
    const auto f = std::strtoul(fragment.c_str(), &end, 10);
    if (end == fragment.c_str() || *end != '\0' || f >= st.fragments.size())
      return make_error(errc::unknown_fragment,
                        "no fragment '" + fragment + "' (this run has " + std::to_string(st.fragments.size()) + ")");
    which.push_back(static_cast<std::uint32_t>(f));
  }
  json out = json::array();
  for (auto f : which) {
    const auto e = explain_round(explain_facts(st, now, f));
    json missing = json::array();
    for (const auto& m : e.missing) missing.push_back(to_json(m));
    out.push_back({{"fragment", e.fragment},
                   {"round", e.round},
                   {"phase", e.phase},
                   {"waiting_for", e.waiting_for},
                   {"since_s", e.since_s},
                   {"contributed", e.contributed},
                   {"missing", missing},
                   {"rule", e.rule},
                   {"text", e.text}});
  }
  return out;
}

json conditions(const registry_state& st, time_point now) {
  condition_facts f;
  f.phase = st.phase;
  f.min_workers = static_cast<std::size_t>(st.cfg.min_workers);
  const auto live = registry_detail::live_workers(st);
  f.live_workers = live.size();
  for (const auto& w : live) {
    const auto view = st.workers.find(w);
    if (view != st.workers.end() && view->second.done) ++f.workers_done;
  }
  f.restart_window_s = static_cast<double>(st.cfg.lease_ms) / 1000.0;
  // A round may wait a lease for a dead member and another for a keeper: three is a stall.
  f.stall_after_s = std::max(60.0, 3.0 * f.restart_window_s);
  for (const auto& [id, n] : st.nodes) {
    // Dead members stay listed; one dead for longer than a stall was replaced or let go.
    if (n.state == member_state::dead && seconds_between(n.since, now) <= f.stall_after_s) ++f.dead_members;
    if (n.state == member_state::joining || n.state == member_state::syncing) ++f.returning_members;
    f.worker_restarts += n.worker_restarts;
  }
  f.fragments = st.fragments.size();
  for (const auto& frag : st.fragments)
    if (frag.placed_on.empty()) ++f.fragments_unplaced;
  const std::size_t slots_per_group = st.cfg.keepers == "nodes" ? 2 : 1;
  for (std::size_t g = 0; g < registry_detail::keeper_groups(st); ++g) {
    const auto slots = registry_detail::replica_slots(st, g);
    for (std::size_t i = 0; i < slots_per_group && i < slots.size(); ++i) {
      ++f.keeper_slots;
      if (slots[i].host.empty()) ++f.keeper_slots_empty;
    }
  }
  if (st.last_round_at) f.since_last_round_s = seconds_between(*st.last_round_at, now);
  if (st.last_worker_restart_at) f.since_worker_restart_s = seconds_between(*st.last_worker_restart_at, now);
  json out = json::array();
  for (const auto& c : run_conditions(f))
    out.push_back({{"type", c.type}, {"status", c.status}, {"reason", c.reason}, {"message", c.message}});
  return out;
}

json status_without_lists(const registry_state& st, time_point now) {
  return {{"cluster_id", st.snap.cluster_id},
          {"epoch", st.snap.epoch},
          {"state", to_string(st.phase)},
          {"conditions", conditions(st, now)},
          {"example", st.cfg.example},
          {"steps", st.cfg.steps},
          {"head", st.deps.listen_endpoint},
          {"uptime_s", seconds_between(st.started, now)},
          {"keepers", keepers(st)},
          {"last_eval", {{"step", st.last_eval_step}, {"val_loss", st.last_val_loss}}},
          {"refused", refusals(st)},
          {"security", security(st)},
          {"head_link", head_link(st)},
          {"data", data_progress(st)},
          {"storage", storage(st)},
          {"registry_writes", registry_writes(st)},
          {"round_duration_s", round_durations(st)}};
}

json status(const registry_state& st, time_point now) {
  // The reply stays far below the envelope cap at ten thousand nodes (docs/design.md,
  // "Message sizes"): the first status_rows members and workers, every one counted;
  // `atollctl members` pages through the rest.
  json members = json::array(), member_states = json::object();
  for (const auto& [id, n] : st.nodes) {
    const std::string state = stored_member_state(n.state);
    member_states[state] = member_states.value(state, std::size_t{0}) + 1;
    if (members.size() < status_rows)
      members.push_back({{"node_id", id}, {"state", state}, {"workers", n.record.workers}, {"batch_job", n.batch_job}});
  }
  auto every_worker = workers(st);
  json steps = {{"least", nullptr}, {"most", nullptr}, {"done", 0}};
  for (const auto& w : every_worker) {
    const auto step = w["step"].get<std::uint64_t>();
    if (steps["least"].is_null() || step < steps["least"].get<std::uint64_t>()) steps["least"] = step;
    if (steps["most"].is_null() || step > steps["most"].get<std::uint64_t>()) steps["most"] = step;
    if (w["done"].get<bool>()) steps["done"] = steps["done"].get<std::size_t>() + 1;
  }
  const auto workers_total = every_worker.size();
  if (every_worker.size() > status_rows) every_worker.erase(every_worker.begin() + status_rows, every_worker.end());
  auto out = status_without_lists(st, now);
  out["members"] = members;
  out["members_total"] = st.nodes.size();
  out["member_states"] = member_states;
  out["workers"] = every_worker;
  out["workers_total"] = workers_total;
  out["worker_steps"] = steps;
  out["fragments"] = fragments(st, false);
  return out;
}

}  // namespace atl::views
