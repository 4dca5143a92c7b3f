#include "actors/registry/queries.hpp"

#include <algorithm>

namespace atl::registry_detail {

bool any_worker_done(const registry_state& st) {
  return std::any_of(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; });
}

std::vector<std::string> live_workers(const registry_state& st) {
  std::vector<std::string> out;
  for (const auto& [_, n] : st.nodes)
    if (takes_part(n.state))
      for (const auto& w : n.record.workers) out.push_back(w);
  std::sort(out.begin(), out.end());
  return out;
}

placement::node_facts node_facts(const registry_state& st) {
  placement::node_facts facts;
  for (const auto& [id, n] : st.nodes) facts.push_back({id, n.state, n.record.can_keep});
  return facts;
}

std::size_t keeper_groups(const registry_state& st) { return st.snap.keeper_groups.size(); }

std::vector<placement::replica_slot> replica_slots(const registry_state& st, std::size_t group) {
  const auto& g = st.snap.keeper_groups.at(group);
  return {{g.replica_keeper_number, g.replica_keeper}, {g.second_replica_keeper_number, g.second_replica_keeper}};
}

std::optional<placement::replica_handover> pending_handover(const registry_state& st, std::size_t group) {
  const auto& g = st.snap.keeper_groups.at(group);
  if (g.incoming_for == 0) return std::nullopt;
  return placement::replica_handover{
      g.incoming_for - 1, {g.incoming_keeper_number, g.incoming_keeper}, g.incoming_spreading};
}

std::vector<std::string> commit_keepers_of(const registry_state& st, std::size_t group) {
  return placement::commit_keepers(st.cfg.keepers == "nodes", replica_slots(st, group), pending_handover(st, group));
}

bool commits_to(const registry_state& st, const std::string& keeper) {
  for (std::size_t g = 0; g < keeper_groups(st); ++g) {
    const auto keepers = commit_keepers_of(st, g);
    if (std::find(keepers.begin(), keepers.end(), keeper) != keepers.end()) return true;
  }
  return false;
}

std::vector<placed_replica> placed_replicas(const registry_state& st) {
  std::vector<placed_replica> out;
  for (std::size_t g = 0; g < keeper_groups(st); ++g) {
    for (const auto& slot : replica_slots(st, g))
      if (!slot.host.empty()) out.push_back({slot.number, slot.host, g});
    if (auto pending = pending_handover(st, g); pending && !pending->incoming.host.empty())
      out.push_back({pending->incoming.number, pending->incoming.host, g});
  }
  return out;
}

std::vector<std::string> hosts_of_other_groups(const registry_state& st, std::size_t group) {
  std::vector<std::string> hosts;
  for (const auto& r : placed_replicas(st))
    if (r.group != group) hosts.push_back(r.host);
  return hosts;
}

}  // namespace atl::registry_detail
