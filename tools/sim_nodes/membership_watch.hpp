#pragma once
// What `atoll_sim_nodes` measures, from the PeerTables its nodes receive (pure: the caller
// gives it the time): when each node first finds itself in a table ("joined": a member of
// a published epoch), and when a node that was killed, silenced or left is first missing
// from a table that another node of this process received, at an epoch above every table
// that named it ("gone").
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "runtime/transport/peer_routes.hpp"

namespace atl::sim {

using clock = std::chrono::steady_clock;

struct watch_event {
  std::string what;  // "joined", or the fault: "kill", "silence", "leave"
  std::uint32_t node = 0;
  double seconds = 0;  // from its start (joined) or from the fault (gone)
};

class membership_watch {
 public:
  // Node `index` of this process started connecting at `at`.
  void started(std::size_t index, clock::time_point at);
  // Node `index` (id `self_node`, 0 before its Welcome) came to hold `table` (whose
  // routes_digest is `digest`) at `at`.
  std::vector<watch_event> table_seen(std::size_t index, std::uint32_t self_node, const route_table& table,
                                      std::uint64_t digest, clock::time_point at);
  // The node with `index` had `fault` at `at`; false when it is not a member yet (nothing
  // to time).
  bool fault(std::size_t index, const std::string& fault, clock::time_point at);
  // Nodes that are members and have no fault: the candidates for the next one.
  std::vector<std::size_t> healthy_members() const;
  std::size_t members() const;
  std::size_t faults_pending() const { return pending_.size(); }

  // Whether the healthy members hold the same table: how many distinct tables (by
  // routes_digest) they hold, the newest epoch, and how many nodes that epoch's table lists.
  struct agreement {
    std::size_t holders = 0, distinct = 0, listed = 0;
    std::uint64_t epoch = 0;
  };
  agreement tables_held() const;

 private:
  struct node_record {
    clock::time_point started;
    std::uint32_t id = 0;
    bool member = false;
    bool faulted = false;
    std::uint64_t last_epoch_naming_it = 0;
    std::uint64_t held_digest = 0;  // routes_digest of the last table it received
    std::uint64_t held_epoch = 0;
    std::size_t held_listed = 0;
  };
  struct pending_fault {
    std::size_t index;
    std::string what;
    clock::time_point at;
    std::uint64_t epoch_naming_it;
  };
  std::map<std::size_t, node_record> nodes_;
  std::vector<pending_fault> pending_;
};

}  // namespace atl::sim
