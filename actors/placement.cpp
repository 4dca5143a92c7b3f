#include "actors/placement.hpp"

#include <algorithm>

#include "runtime/actor_id.hpp"

namespace atl::placement {
namespace {

std::vector<std::uint32_t> taking_part(const node_facts& nodes) {
  std::vector<std::uint32_t> ids;
  for (const auto& n : nodes)
    if (takes_part(n.state)) ids.push_back(n.id);
  return ids;
}

// A placement's host still runs what was placed on it.
bool host_alive(const std::string& host, const node_facts& nodes) {
  const auto id = node_of(host);
  if (!id) return false;
  const auto it = std::find_if(nodes.begin(), nodes.end(), [&](const node_fact& n) { return n.id == *id; });
  return it != nodes.end() && hosts_placed(it->state);
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

keeper_choice choose_replica_keeper(std::uint32_t number, const std::string& current, const std::string& avoid,
                                    const node_facts& nodes, bool training) {
  if (!training || (!current.empty() && host_alive(current, nodes))) return {};
  std::string chosen;
  for (auto it = nodes.rbegin(); it != nodes.rend() && chosen.empty(); ++it)
    if (takes_part(it->state) && it->can_keep && node_actor_id(it->id) != avoid) chosen = node_actor_id(it->id);
  if (chosen == current) return {};
  const auto keeper = keeper_id(number);
  if (chosen.empty())
    return {true, "",
            current + " is gone and no other live node can keep; " + keeper_id(head_keeper_number) + " stands in for " +
                keeper + " in commits"};
  return {true, chosen, keeper + " placed on " + chosen + (current.empty() ? "" : " (was on " + current + ")")};
}

std::vector<std::string> commit_keepers(bool on_nodes, const std::string& first_host, const std::string& second_host) {
  std::vector<std::string> keepers;
  if (!on_nodes || first_host.empty() || second_host.empty()) keepers.push_back(keeper_id(head_keeper_number));
  if (!first_host.empty()) keepers.push_back(keeper_id(replica_keeper_number));
  if (on_nodes && !second_host.empty()) keepers.push_back(keeper_id(second_replica_keeper_number));
  return keepers;
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
