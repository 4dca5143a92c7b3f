#include "runtime/transport/route_delta.hpp"

#include <string>

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

std::uint64_t text_hash(const std::string& text) { return digest64(text.data(), text.size()); }

std::uint64_t node_hash(std::uint32_t id, const peer_node& peer) {
  return text_hash(std::to_string(id) + " " + peer.endpoint + " " + peer.public_key);
}

std::uint64_t placements_sum(const std::map<std::string, std::uint32_t>& placed) {
  std::uint64_t sum = 0;
  for (const auto& [id, host] : placed) sum += text_hash(id + " " + std::to_string(host));
  return sum;
}

std::uint64_t nodes_sum(const std::map<std::uint32_t, peer_node>& nodes) {
  std::uint64_t sum = 0;
  for (const auto& [id, peer] : nodes) sum += node_hash(id, peer);
  return sum;
}

std::uint64_t mix(std::uint64_t epoch, std::uint64_t node_sum, std::uint64_t placed_sum) {
  const std::uint64_t words[3] = {epoch, node_sum, placed_sum};
  return digest64(words, sizeof words);
}

}  // namespace

std::uint64_t routes_digest(const route_table& table) {
  return mix(table.epoch, nodes_sum(table.nodes), placements_sum(table.placed));
}

route_delta whole_routes(const route_table& table) {
  route_delta d;
  d.table = table;
  d.digest = routes_digest(table);
  return d;
}

route_delta diff_routes(const route_table& from, const route_table& to) {
  route_delta d;
  d.delta = true;
  d.base_epoch = from.epoch;
  d.table.epoch = to.epoch;
  for (const auto& [id, peer] : to.nodes) {
    const auto was = from.nodes.find(id);
    if (was == from.nodes.end() || !(was->second == peer)) d.table.nodes[id] = peer;
  }
  for (const auto& [id, _] : from.nodes)
    if (!to.nodes.count(id)) d.removed.push_back(id);
  d.placements_changed = from.placed != to.placed;
  if (d.placements_changed) d.table.placed = to.placed;
  d.digest = routes_digest(to);
  return d;
}

route_delta version_check(std::uint64_t epoch, std::uint64_t digest) {
  route_delta d;
  d.delta = true;
  d.base_epoch = epoch;
  d.table.epoch = epoch;
  d.placements_changed = false;
  d.digest = digest;
  return d;
}

std::set<std::string> apply_delta_in_place(route_table& table, const route_delta& d) {
  std::set<std::string> gone;
  for (const auto id : d.removed) {
    const auto it = table.nodes.find(id);
    if (it == table.nodes.end()) continue;
    if (!it->second.endpoint.empty()) gone.insert(it->second.endpoint);
    table.nodes.erase(it);
  }
  for (const auto& [id, peer] : d.table.nodes) {
    auto& held = table.nodes[id];
    if (!held.endpoint.empty() && held.endpoint != peer.endpoint) gone.insert(held.endpoint);
    held = peer;
  }
  for (const auto& [_, peer] : d.table.nodes) gone.erase(peer.endpoint);  // moved to another id
  table.epoch = d.table.epoch;
  if (d.placements_changed) table.placed = d.table.placed;
  return gone;
}

held_routes::held_routes(route_table table)
    : table_(std::move(table)), node_sum_(nodes_sum(table_.nodes)), placed_sum_(placements_sum(table_.placed)) {}

std::uint64_t held_routes::digest() const { return mix(table_.epoch, node_sum_, placed_sum_); }

route_verdict held_routes::apply(const route_delta& d) {
  if (!d.delta) {
    *this = held_routes(d.table);
    return route_verdict::applied;
  }
  if (table_.epoch != d.base_epoch) return route_verdict::needs_whole_table;
  // The sums the table would have, from the entries the delta touches only.
  std::uint64_t node_sum = node_sum_;
  for (const auto id : d.removed) {
    const auto it = table_.nodes.find(id);
    if (it != table_.nodes.end()) node_sum -= node_hash(id, it->second);
  }
  for (const auto& [id, peer] : d.table.nodes) {
    const auto it = table_.nodes.find(id);
    if (it != table_.nodes.end()) node_sum -= node_hash(id, it->second);
    node_sum += node_hash(id, peer);
  }
  const std::uint64_t placed_sum = d.placements_changed ? placements_sum(d.table.placed) : placed_sum_;
  if (mix(d.table.epoch, node_sum, placed_sum) != d.digest) return route_verdict::needs_whole_table;
  apply_delta_in_place(table_, d);
  node_sum_ = node_sum;
  placed_sum_ = placed_sum;
  return route_verdict::applied;
}

route_follower::effect route_follower::on_table(const route_delta& d, std::chrono::steady_clock::time_point now,
                                                std::chrono::milliseconds ask_interval) {
  const bool version_check =
      d.delta && d.table.nodes.empty() && d.removed.empty() && !d.placements_changed && d.base_epoch == d.table.epoch;
  if (routes_.apply(d) == route_verdict::applied) return version_check ? effect::nothing : effect::hand_table_to_links;
  if (asked_ && now - *asked_ < ask_interval) return effect::nothing;
  asked_ = now;
  return effect::ask_for_whole_table;
}

void write_route_delta(const route_delta& d, schema::PeerTable::Builder out) {
  write_peer_table(d.table, out);
  out.setDelta(d.delta);
  out.setBaseEpoch(d.base_epoch);
  auto removed = out.initRemovedNodes(static_cast<unsigned>(d.removed.size()));
  for (unsigned i = 0; i < d.removed.size(); ++i) removed.set(i, d.removed[i]);
  out.setPlacementsChanged(d.placements_changed);
  out.setDigest(d.digest);
}

route_delta read_route_delta(schema::PeerTable::Reader in) {
  route_delta d;
  d.table = read_peer_table(in);
  d.delta = in.getDelta();
  d.base_epoch = in.getBaseEpoch();
  for (const auto id : in.getRemovedNodes()) d.removed.push_back(id);
  d.placements_changed = !d.delta || in.getPlacementsChanged();
  d.digest = in.getDigest();
  return d;
}

}  // namespace atl
