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
// The two replica places, and a hand-over of one in progress.
std::vector<placement::replica_slot> replica_slots(const registry_state& st);
std::optional<placement::replica_handover> pending_handover(const registry_state& st);
std::vector<std::string> commit_keepers_of(const registry_state& st);  // placement::commit_keepers
// The replica keepers placed, with their hosts: both places' and a hand-over's incoming one.
std::vector<std::pair<std::uint32_t, std::string>> placed_replicas(const registry_state& st);  // number, host

}  // namespace atl::registry_detail
