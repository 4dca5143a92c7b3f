#include "actors/decisions/placement.hpp"

#include <algorithm>

#include "runtime/core/actor_id.hpp"

namespace atl::placement {
namespace {

std::vector<std::uint32_t> taking_part(const node_facts& nodes) {
  std::vector<std::uint32_t> ids;
  for (const auto& n : nodes)
    if (takes_part(n.state)) ids.push_back(n.id);
  return ids;
}

const node_fact* find_node(const std::string& host, const node_facts& nodes) {
  const auto id = node_of(host);
  if (!id) return nullptr;
  const auto it = std::find_if(nodes.begin(), nodes.end(), [&](const node_fact& n) { return n.id == *id; });
  return it == nodes.end() ? nullptr : &*it;
}

// A placement's host still runs what was placed on it.
bool host_alive(const std::string& host, const node_facts& nodes) {
  const auto* n = find_node(host, nodes);
  return n && hosts_placed(n->state);
}

bool host_draining(const std::string& host, const node_facts& nodes) {
  const auto* n = find_node(host, nodes);
  return n && n->state == member_state::draining;
}

// The newest node that takes part, can keep, and is none of `avoid`; "" if none.
std::string newest_keeping_node(const node_facts& nodes, const std::vector<std::string>& avoid) {
  for (auto it = nodes.rbegin(); it != nodes.rend(); ++it) {
    const auto host = node_actor_id(it->id);
    if (takes_part(it->state) && it->can_keep && std::find(avoid.begin(), avoid.end(), host) == avoid.end())
      return host;
  }
  return "";
}

// A spreading hand-over's next step (the diagram's last rows): the incoming replica on a
// node that takes part.
handover_decision decide_spreading(const replica_slot& slot, const replica_slot& incoming, const node_facts& nodes,
                                   bool incoming_ready, bool timed_out) {
  handover_decision d;
  const auto moving = keeper_id(slot.number) + " on " + slot.host;
  const auto taking = keeper_id(incoming.number) + " on " + incoming.host;
  if (!host_alive(slot.host, nodes)) {
    d.what = handover_decision::step::promote;
    d.reason = slot.host + " is gone while spreading; " + taking + " takes the place of " + keeper_id(slot.number) +
               " and catches up from the commits";
  } else if (incoming_ready) {
    d.what = handover_decision::step::promote;
    d.drop = slot;
    d.reason = taking + " caught up and takes the place of " + moving + ", which stops there";
  } else if (timed_out) {
    d.what = handover_decision::step::cancel;
    d.drop = incoming;
    d.reason = "spreading " + moving + " to " + incoming.host + " timed out (cluster.handover_ms)";
  }
  return d;
}

// No hand-over pending: a slot whose live host another group's replica shares moves to a
// node that keeps nothing, if one takes part. `d` is the decision so far (its releases).
handover_decision start_spreading(const std::vector<replica_slot>& slots, const node_facts& nodes,
                                  const std::vector<std::string>& other_groups, handover_decision d) {
  std::vector<std::string> keeping = other_groups;
  for (const auto& s : slots)
    if (!s.host.empty()) keeping.push_back(s.host);
  for (std::size_t i = 0; i < slots.size(); ++i) {
    const auto& host = slots[i].host;
    if (host.empty() || !host_alive(host, nodes) || host_draining(host, nodes)) continue;
    if (std::find(other_groups.begin(), other_groups.end(), host) == other_groups.end()) continue;
    const auto to = newest_keeping_node(nodes, keeping);
    if (to.empty()) break;
    d.what = handover_decision::step::start;
    d.slot = i;
    d.host = to;
    d.spreading = true;
    d.reason = keeper_id(slots[i].number) + " on " + host + " shares its node with another keeper group; " +
               "handed over to " + to + ", which keeps nothing";
    break;
  }
  return d;
}

}  // namespace

std::vector<coordinator_move> place_coordinators(std::size_t fragments, const node_facts& nodes) {
  const auto live = taking_part(nodes);
  std::vector<coordinator_move> out;
  if (live.empty()) return out;
  for (std::size_t f = 0; f < fragments; ++f) {
    const auto to = node_actor_id(live[f % live.size()]);
    out.push_back({f, to, "coordinator of fragment " + std::to_string(f) + " placed on " + to});
  }
  return out;
}

std::vector<coordinator_move> replace_orphans(const std::vector<std::string>& placements, const node_facts& nodes) {
  const auto live = taking_part(nodes);
  std::vector<coordinator_move> out;
  if (live.empty()) return out;
  for (std::size_t f = 0; f < placements.size(); ++f) {
    const auto& from = placements[f];
    if (from.empty() || host_alive(from, nodes)) continue;
    const auto to = node_actor_id(live[f % live.size()]);
    out.push_back({f, to, from + " is gone; coordinator of fragment " + std::to_string(f) + " re-placed on " + to});
  }
  return out;
}

keeper_choice choose_replica_keeper(std::uint32_t number, const std::string& current,
                                    const std::vector<std::string>& avoid, const node_facts& nodes, bool training,
                                    const std::vector<std::string>& rather_not,
                                    const std::vector<std::string>& prefer) {
  if (!training || (!current.empty() && host_alive(current, nodes))) return {};
  auto spread = avoid;
  spread.insert(spread.end(), rather_not.begin(), rather_not.end());
  std::string chosen;
  for (const auto& host : prefer) {
    const auto* n = find_node(host, nodes);
    if (n && takes_part(n->state) && n->can_keep && std::find(spread.begin(), spread.end(), host) == spread.end()) {
      chosen = host;
      break;
    }
  }
  if (chosen.empty()) chosen = newest_keeping_node(nodes, spread);
  if (chosen.empty()) chosen = newest_keeping_node(nodes, avoid);
  if (chosen == current) return {};
  const auto keeper = keeper_id(number);
  if (chosen.empty())
    return {true, "",
            current + " is gone and no other live node can keep; " + keeper_id(head_keeper_number) + " stands in for " +
                keeper + " in commits"};
  return {true, chosen, keeper + " placed on " + chosen + (current.empty() ? "" : " (was on " + current + ")")};
}

std::size_t keeper_group_count(std::size_t shards) { return shards <= 2 ? 1 : (shards + 1) / 2; }

std::size_t keeper_group_of(std::size_t unit, std::size_t groups) { return groups <= 1 ? 0 : unit % groups; }

std::vector<std::uint32_t> units_of_group(std::size_t group, std::size_t groups, std::size_t units) {
  std::vector<std::uint32_t> out;
  for (std::size_t u = 0; u < units; ++u)
    if (keeper_group_of(u, groups) == group) out.push_back(static_cast<std::uint32_t>(u));
  return out;
}

std::vector<std::string> preferred_replica_hosts(std::size_t group, std::size_t groups,
                                                 const std::vector<std::string>& placements) {
  std::vector<std::string> hosts;
  for (const auto unit : units_of_group(group, groups, placements.size())) {
    if (hosts.size() == 2) break;
    hosts.push_back(placements[unit]);
  }
  hosts.resize(2);
  return hosts;
}

std::vector<std::string> commit_keepers(bool on_nodes, const std::vector<replica_slot>& slots,
                                        const std::optional<replica_handover>& pending) {
  const auto placed = [&](std::size_t i) { return i < slots.size() && !slots[i].host.empty(); };
  std::vector<std::string> keepers;
  if (!on_nodes || !placed(0) || !placed(1)) keepers.push_back(keeper_id(head_keeper_number));
  if (placed(0)) keepers.push_back(keeper_id(slots[0].number));
  if (on_nodes && placed(1)) keepers.push_back(keeper_id(slots[1].number));
  if (pending && !pending->incoming.host.empty()) keepers.push_back(keeper_id(pending->incoming.number));
  return keepers;
}

handover_decision decide_handover(const std::vector<replica_slot>& slots,
                                  const std::optional<replica_handover>& pending, const node_facts& nodes,
                                  bool training, bool incoming_ready, bool timed_out,
                                  const std::vector<std::string>& other_groups) {
  handover_decision d;
  // Draining nodes that host a slot wait for the hand-over; `held` collects them.
  std::vector<std::string> held;
  std::vector<std::string> slot_hosts;
  for (const auto& s : slots)
    if (!s.host.empty()) slot_hosts.push_back(s.host);
  if (training && pending && pending->slot < slots.size()) {
    const auto& slot = slots[pending->slot];
    const auto& incoming = pending->incoming;
    const auto moving = keeper_id(slot.number) + " on " + slot.host;
    const auto taking = keeper_id(incoming.number) + " on " + incoming.host;
    const auto* in = find_node(incoming.host, nodes);
    if (!in || !takes_part(in->state)) {
      d.what = handover_decision::step::cancel;
      d.reason = "hand-over of " + moving + " cancelled: " + incoming.host + " no longer takes part";
      held.push_back(slot.host);  // the next decision hands it to another node, or lets it go
    } else if (pending->spreading) {
      const auto spread = decide_spreading(slot, incoming, nodes, incoming_ready, timed_out);
      d.what = spread.what;
      d.drop = spread.drop;
      d.reason = spread.reason;
      if (host_draining(slot.host, nodes) && d.what == handover_decision::step::none && !timed_out)
        held.push_back(slot.host);  // it began to leave meanwhile: the incoming one is nearly there
    } else if (host_alive(slot.host, nodes) && !host_draining(slot.host, nodes)) {
      d.what = handover_decision::step::cancel;  // it came back as a member (a head restart)
      d.drop = incoming;  // the replica that was to take its place stops
      d.reason = "hand-over of " + moving + " cancelled: " + slot.host + " takes part again";
    } else if (!host_alive(slot.host, nodes)) {
      d.what = handover_decision::step::promote;
      d.reason = slot.host + " is gone mid-hand-over; " + taking + " takes the place of " + keeper_id(slot.number) +
                 " and catches up from the commits";
    } else if (incoming_ready) {
      d.what = handover_decision::step::promote;
      d.reason = taking + " caught up and takes the place of " + moving;
    } else if (!timed_out) {
      held.push_back(slot.host);
    } else {
      d.reason = "hand-over of " + moving + " timed out (cluster.handover_ms); " + slot.host + " leaves now, and " +
                 taking + " takes its place at its goodbye";
    }
    // Another slot's draining host waits its turn, unless this one is stuck.
    for (std::size_t i = 0; i < slots.size(); ++i)
      if (i != pending->slot && host_draining(slots[i].host, nodes) && !timed_out) held.push_back(slots[i].host);
  } else if (training) {
    for (std::size_t i = 0; i < slots.size() && d.what == handover_decision::step::none; ++i) {
      if (!host_draining(slots[i].host, nodes)) continue;
      const auto to = newest_keeping_node(nodes, slot_hosts);
      if (to.empty()) {
        d.reason = slots[i].host + " leaves with " + keeper_id(slots[i].number) +
                   " and no other node can keep; the replica is placed anew after its goodbye";
        continue;
      }
      d.what = handover_decision::step::start;
      d.slot = i;
      d.host = to;
      d.reason = slots[i].host + " is leaving; " + keeper_id(slots[i].number) + " is handed over to " + to;
      held.push_back(slots[i].host);
    }
    for (std::size_t i = 0; i < slots.size(); ++i)  // the other slot's host waits its turn
      if (d.what == handover_decision::step::start && i != d.slot && host_draining(slots[i].host, nodes))
        held.push_back(slots[i].host);
    if (d.what == handover_decision::step::none) d = start_spreading(slots, nodes, other_groups, std::move(d));
  }
  for (const auto& n : nodes) {
    const auto host = node_actor_id(n.id);
    if (n.state == member_state::draining && std::find(held.begin(), held.end(), host) == held.end())
      d.release.push_back(host);
  }
  return d;
}

std::optional<std::string> resume_source(const std::vector<std::string>& keepers,
                                         const std::map<std::string, std::optional<std::uint64_t>>& answered) {
  std::optional<std::string> chosen;
  std::optional<std::uint64_t> newest;
  for (const auto& keeper : keepers) {
    auto it = answered.find(keeper);
    if (it == answered.end()) return std::nullopt;
    if (!chosen || it->second > newest) {  // an empty optional is older than any round
      chosen = keeper;
      newest = it->second;
    }
  }
  return chosen;
}

}  // namespace atl::placement
