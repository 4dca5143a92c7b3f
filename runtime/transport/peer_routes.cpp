#include "runtime/transport/peer_routes.hpp"

#include <algorithm>

#include "runtime/core/actor_id.hpp"

namespace atl {

std::optional<std::uint32_t> route_table::host_of(std::string_view id) const {
  if (auto node = host_node_of(id)) return node;
  if (is_kind(id, actor_kind::coordinator) || is_kind(id, actor_kind::keeper)) {
    auto it = placed.find(std::string(id));
    if (it != placed.end()) return it->second;
  }
  return std::nullopt;
}

route choose_route(const route_table& table, std::uint32_t self_node, std::string_view receiver) {
  const auto host = table.host_of(receiver);
  if (!host || *host == self_node) return {};  // the head's actors, unknown ids, or ours not started yet
  auto node = table.nodes.find(*host);
  if (node == table.nodes.end() || node->second.endpoint.empty()) return {};
  return {route::kind::direct, *host, node->second.endpoint, node->second.public_key};
}

bool awaits_new_placement(const route_table& table, std::string_view receiver) {
  if (!is_kind(receiver, actor_kind::coordinator) && !is_kind(receiver, actor_kind::keeper)) return false;
  const auto placed = table.placed.find(std::string(receiver));
  return placed != table.placed.end() && !table.nodes.count(placed->second);
}

status check_sender(const route_table& table, std::string_view sender, std::string_view peer_key) {
  if (peer_key.empty()) return {};
  const auto id = parse_actor_id(sender);
  if (!id) return id.err();
  switch (id->kind) {
    case actor_kind::control:
    case actor_kind::pending_node: return {};  // before any node id: nothing to speak for yet
    case actor_kind::registry:
      return make_error(errc::sender_conflict, "'" + std::string(sender) + "' is the head's own actor");
    default: break;
  }
  if (id->kind == actor_kind::keeper && id->number == head_keeper_number)
    return make_error(errc::sender_conflict, "'" + std::string(sender) + "' is the head's own actor");
  const auto host = table.host_of(sender);
  if (!host) return make_error(errc::sender_conflict, "'" + std::string(sender) + "' is not placed on any node");
  auto node = table.nodes.find(*host);
  // Not a member (new, dead, or left): the registry fences it by epoch.
  if (node == table.nodes.end() || node->second.public_key.empty()) return {};
  if (node->second.public_key == peer_key) return {};
  return make_error(errc::sender_conflict, "'" + std::string(sender) + "' belongs to node " + std::to_string(*host) +
                                               "; this link authenticated with another node's key");
}

void write_peer_table(const route_table& table, schema::PeerTable::Builder out) {
  out.setEpoch(table.epoch);
  auto nodes = out.initNodes(static_cast<unsigned>(table.nodes.size()));
  unsigned i = 0;
  for (const auto& [id, peer] : table.nodes) {
    nodes[i].setNodeId(id);
    nodes[i].setEndpoint(peer.endpoint);
    nodes[i].setPublicKey(peer.public_key);
    ++i;
  }
  std::uint32_t fragments = 0;  // coordinators are listed by fragment index
  for (const auto& [id, _] : table.placed)
    if (auto f = fragment_of_coordinator(id)) fragments = std::max(fragments, *f + 1);
  auto coordinators = out.initCoordinators(fragments);
  unsigned keepers = 0;
  for (const auto& [id, host] : table.placed) {
    if (auto f = fragment_of_coordinator(id)) coordinators.set(*f, node_actor_id(host));
    else if (is_kind(id, actor_kind::keeper)) ++keepers;
  }
  auto placed_keepers = out.initKeepers(keepers);
  unsigned k = 0;
  for (const auto& [id, host] : table.placed) {
    if (!is_kind(id, actor_kind::keeper)) continue;
    placed_keepers[k].setKeeper(id);
    placed_keepers[k].setHost(node_actor_id(host));
    ++k;
  }
}

route_table read_peer_table(schema::PeerTable::Reader in) {
  route_table table;
  table.epoch = in.getEpoch();
  for (auto n : in.getNodes()) table.nodes[n.getNodeId()] = {n.getEndpoint(), n.getPublicKey()};
  const auto coordinators = in.getCoordinators();
  for (unsigned f = 0; f < coordinators.size(); ++f)
    if (auto host = node_of(coordinators[f].cStr())) table.placed[coordinator_id(f)] = *host;
  // The head's own keeper is never placed on a node: a table that says so is ignored there.
  for (auto k : in.getKeepers()) {
    const auto id = parse_actor_id(k.getKeeper().cStr());
    const auto host = node_of(k.getHost().cStr());
    if (id && host && id->kind == actor_kind::keeper && id->number != head_keeper_number)
      table.placed[keeper_id(id->number)] = *host;
  }
  return table;
}

}  // namespace atl
