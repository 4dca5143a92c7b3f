#include "runtime/transport/route_delta.hpp"

#include <string>

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

bool same_peer(const peer_node& a, const peer_node& b) {
  return a.endpoint == b.endpoint && a.public_key == b.public_key;
}

}  // namespace

std::uint64_t routes_digest(const route_table& table) {
  std::string text = std::to_string(table.epoch) + "\n";
  for (const auto& [id, peer] : table.nodes)
    text += std::to_string(id) + " " + peer.endpoint + " " + peer.public_key + "\n";
  for (const auto& [id, host] : table.placed) text += id + " " + std::to_string(host) + "\n";
  return digest64(text.data(), text.size());
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
    if (was == from.nodes.end() || !same_peer(was->second, peer)) d.table.nodes[id] = peer;
  }
  for (const auto& [id, _] : from.nodes)
    if (!to.nodes.count(id)) d.removed.push_back(id);
  d.placements_changed = from.placed != to.placed;
  if (d.placements_changed) d.table.placed = to.placed;
  d.digest = routes_digest(to);
  return d;
}

route_verdict apply_routes(route_table& mine, const route_delta& d) {
  if (!d.delta) {
    mine = d.table;
    return route_verdict::applied;
  }
  if (mine.epoch != d.base_epoch) return route_verdict::needs_whole_table;
  route_table next = mine;
  next.epoch = d.table.epoch;
  for (const auto& [id, peer] : d.table.nodes) next.nodes[id] = peer;
  for (const auto id : d.removed) next.nodes.erase(id);
  if (d.placements_changed) next.placed = d.table.placed;
  if (routes_digest(next) != d.digest) return route_verdict::needs_whole_table;
  mine = std::move(next);
  return route_verdict::applied;
}

route_follower::effect route_follower::on_table(const route_delta& d, std::chrono::steady_clock::time_point now,
                                                std::chrono::milliseconds ask_interval) {
  const bool version_check =
      d.delta && d.table.nodes.empty() && d.removed.empty() && !d.placements_changed && d.base_epoch == d.table.epoch;
  // A version check of the table held passes on the digest kept: no copy, no hashing of
  // every node each tick.
  if (version_check && held_ && table_.epoch == d.base_epoch && held_digest_ == d.digest) return effect::nothing;
  if (apply_routes(table_, d) == route_verdict::applied) {
    held_ = true;
    held_digest_ = d.delta ? d.digest : routes_digest(table_);  // a delta's digest was checked
    return version_check ? effect::nothing : effect::hand_table_to_links;
  }
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
