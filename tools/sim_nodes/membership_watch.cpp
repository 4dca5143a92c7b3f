#include "tools/sim_nodes/membership_watch.hpp"

#include <algorithm>
#include <set>

#include "runtime/transport/route_delta.hpp"

namespace atl::sim {
namespace {

double seconds_between(clock::time_point from, clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

}  // namespace

void membership_watch::started(std::size_t index, clock::time_point at) { nodes_[index] = node_record{at}; }

std::vector<watch_event> membership_watch::table_seen(std::size_t index, std::uint32_t self_node,
                                                      const route_table& table, std::uint64_t digest,
                                                      clock::time_point at) {
  std::vector<watch_event> events;
  auto found = nodes_.find(index);
  if (found == nodes_.end()) return events;
  auto& self = found->second;
  self.held_digest = digest;
  self.held_epoch = table.epoch;
  self.held_listed = table.nodes.size();
  if (self_node != 0 && table.nodes.count(self_node)) {
    self.id = self_node;
    self.last_epoch_naming_it = std::max(self.last_epoch_naming_it, table.epoch);
    if (!self.member) {
      self.member = true;
      events.push_back({"joined", self_node, seconds_between(self.started, at)});
    }
  }
  if (self.faulted) return events;  // a faulty node's view times nothing
  for (auto it = pending_.begin(); it != pending_.end();) {
    const auto& victim = nodes_.at(it->index);
    if (table.epoch > it->epoch_naming_it && !table.nodes.count(victim.id)) {
      events.push_back({it->what, victim.id, seconds_between(it->at, at)});
      it = pending_.erase(it);
    } else {
      ++it;
    }
  }
  return events;
}

bool membership_watch::fault(std::size_t index, const std::string& what, clock::time_point at) {
  auto found = nodes_.find(index);
  if (found == nodes_.end() || !found->second.member || found->second.faulted) return false;
  found->second.faulted = true;
  pending_.push_back({index, what, at, found->second.last_epoch_naming_it});
  return true;
}

std::vector<std::size_t> membership_watch::healthy_members() const {
  std::vector<std::size_t> out;
  for (const auto& [index, n] : nodes_)
    if (n.member && !n.faulted) out.push_back(index);
  return out;
}

std::size_t membership_watch::members() const {
  return static_cast<std::size_t>(
      std::count_if(nodes_.begin(), nodes_.end(), [](const auto& n) { return n.second.member && !n.second.faulted; }));
}

membership_watch::agreement membership_watch::tables_held() const {
  agreement a;
  std::set<std::uint64_t> digests;
  for (const auto& [index, n] : nodes_) {
    if (!n.member || n.faulted) continue;
    a.holders++;
    digests.insert(n.held_digest);
    if (n.held_epoch >= a.epoch) {
      a.epoch = n.held_epoch;
      a.listed = n.held_listed;
    }
  }
  a.distinct = digests.size();
  return a;
}

}  // namespace atl::sim
