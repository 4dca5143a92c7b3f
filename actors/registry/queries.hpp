#pragma once
// Pure queries over the registry's state: what the actor's handlers and its views both ask.
// No CAF, no messages.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/decisions/placement.hpp"
#include "actors/registry/state.hpp"

namespace atl::registry_detail {

bool any_worker_done(const registry_state& st);
// Workers of the nodes that take part, sorted.
std::vector<std::string> live_workers(const registry_state& st);
placement::node_facts node_facts(const registry_state& st);
// Keeper groups (placement::keeper_group_count): group g keeps the units u with
// u mod groups == g, with two replica places of its own and a hand-over of one in progress.
std::size_t keeper_groups(const registry_state& st);
std::vector<placement::replica_slot> replica_slots(const registry_state& st, std::size_t group);
std::optional<placement::replica_handover> pending_handover(const registry_state& st, std::size_t group);
std::vector<std::string> commit_keepers_of(const registry_state& st, std::size_t group);  // placement::commit_keepers
// Whether a keeper acknowledges some group's commits.
bool commits_to(const registry_state& st, const std::string& keeper);
// The replica keepers placed, with their hosts and groups: every group's two places and a
// hand-over's incoming one.
struct placed_replica {
  std::uint32_t number = 0;
  std::string host;
  std::size_t group = 0;
};
std::vector<placed_replica> placed_replicas(const registry_state& st);
// The hosts of every replica of the groups other than `group` (their incoming ones included).
std::vector<std::string> hosts_of_other_groups(const registry_state& st, std::size_t group);
}  // namespace atl::registry_detail
