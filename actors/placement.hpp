#pragma once
// Where the registry places the actors that run on nodes, as pure decisions with their
// reasons; the registry persists a decision before anyone hears of it, then sends it.
//
//   training starts ------------------> coordinator of fragment p on the p-th node that takes part (by id)
//   a coordinator's host is gone -----> moved to the (p mod n)-th node that takes part
//                                      (a draining host keeps it until its Goodbye: moving
//                                       it earlier would run two coordinators of p at once)
//   training, a replica keeper unplaced
//     or its host gone ---------------> the newest node that takes part, can keep and does
//                                      not host the other replica (node/1 usually hosts
//                                      coord/0), or none: the head's keeper then stands in
//                                      for it in commits (registry.cpp, keepers_of)
//
// Hosts are "node/N" ids (runtime/actor_id.hpp); a stored placement that is not one (a
// damaged snapshot) counts as gone.
#include <cstdint>
#include <map>
#include <optional>
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

// The host of replica keeper `number` (keeper/1 or keeper/2) while training: `current` is
// its host now ("" if none), `avoid` the other replica's (two copies on one machine are
// one copy).
keeper_choice choose_replica_keeper(std::uint32_t number, const std::string& current, const std::string& avoid,
                                    const node_facts& nodes, bool training);

// The keepers every commit needs, given the replicas' hosts ("" while unplaced).
// storage.keepers = head: keeper/0, and keeper/1 once placed. nodes: keeper/1 and
// keeper/2 once both are placed, keeper/0 standing in for each one missing, so a committed
// round is on two machines whenever two can hold it.
std::vector<std::string> commit_keepers(bool on_nodes, const std::string& first_host, const std::string& second_host);

// A starting coordinator that asks every keeper it commits to (storage.keepers = nodes,
// where keeper/0 may be behind): `answered` maps each keeper that replied to the round it
// holds (nullopt: none found). Returns the keeper to resume from once every one of
// `keepers` answered: the newest round, the first in `keepers` order on a tie, or any
// keeper when none holds a round (a new run). nullopt while one has not answered yet.
std::optional<std::string> resume_source(const std::vector<std::string>& keepers,
                                         const std::map<std::string, std::optional<std::uint64_t>>& answered);

}  // namespace atl::placement
