#pragma once
// Where the registry places the actors that run on nodes, as pure decisions with their
// reasons; the registry persists a decision before anyone hears of it, then sends it.
//
//   training starts ------------------> coordinator of fragment p on the p-th node that takes part (by id)
//   a coordinator's host is gone -----> moved to the (p mod n)-th node that takes part
//                                      (a draining host keeps it until its Goodbye: moving
//                                       it earlier would run two coordinators of p at once)
//   training, replica keeper unplaced
//     or its host gone ---------------> the newest node that takes part and can keep
//                                      (node/1 usually hosts coord/0), or none: commits then
//                                       go to the head's keeper alone
//
// Hosts are "node/N" ids (runtime/actor_id.hpp); a stored placement that is not one (a
// damaged snapshot) counts as gone.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/membership.hpp"

namespace atl::placement {

struct node_fact {
  std::uint32_t id = 0;
  member_state state = member_state::joining;
  bool can_keep = false;  // has a data dir (atoll join --run-dir)
};
using node_facts = std::vector<node_fact>;  // sorted by id

struct coordinator_move {
  std::size_t fragment = 0;
  std::string to;  // "node/N"
  std::string reason;  // for the log
  bool operator==(const coordinator_move& o) const {
    return fragment == o.fragment && to == o.to && reason == o.reason;
  }
};

// Training starts: every fragment's coordinator placed; none while no node takes part.
std::vector<coordinator_move> place_coordinators(std::size_t fragments, const node_facts& nodes);

// The coordinators whose host no longer hosts what was placed on it, moved to nodes that
// take part; `placements` holds "node/N" or "" (not placed yet) per fragment.
std::vector<coordinator_move> replace_orphans(const std::vector<std::string>& placements, const node_facts& nodes);

struct keeper_choice {
  bool changed = false;
  std::string host;  // "node/N", or "" for none
  std::string reason;  // for the log
};

// The replica keeper's host while training; `current` is its host now ("" if none).
keeper_choice choose_replica_keeper(const std::string& current, const node_facts& nodes, bool training);

}  // namespace atl::placement
