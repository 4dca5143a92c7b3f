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

std::vector<placement::replica_slot> replica_slots(const registry_state& st) {
  return {{st.snap.replica_keeper_number, st.snap.replica_keeper},
          {st.snap.second_replica_keeper_number, st.snap.second_replica_keeper}};
}

std::optional<placement::replica_handover> pending_handover(const registry_state& st) {
  if (st.snap.incoming_for == 0) return std::nullopt;
  return placement::replica_handover{st.snap.incoming_for - 1,
                                     {st.snap.incoming_keeper_number, st.snap.incoming_keeper}};
}

std::vector<std::string> commit_keepers_of(const registry_state& st) {
  return placement::commit_keepers(st.cfg.keepers == "nodes", replica_slots(st), pending_handover(st));
}

std::vector<std::pair<std::uint32_t, std::string>> placed_replicas(const registry_state& st) {
  std::vector<std::pair<std::uint32_t, std::string>> out;
  for (const auto& slot : replica_slots(st))
    if (!slot.host.empty()) out.emplace_back(slot.number, slot.host);
  if (auto pending = pending_handover(st); pending && !pending->incoming.host.empty())
    out.emplace_back(pending->incoming.number, pending->incoming.host);
  return out;
}

}  // namespace atl::registry_detail
