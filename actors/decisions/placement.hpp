#pragma once
// Where the registry places the actors that run on nodes, as pure decisions with their
// reasons; the registry persists a decision before anyone hears of it, then sends it.
//
//   training starts ------------------> coordinator of fragment p on the p-th node that takes part (by id)
//   a coordinator's host is gone -----> moved to the (p mod n)-th node that takes part
//                                      (a draining host keeps it until its Goodbye: moving
//                                       it earlier would run two coordinators of p at once)
//   training, a replica keeper unplaced
//     or its host gone ---------------> the host of a coordinator of its group's units, if
//                                      it can keep and holds no other replica (one copy of
//                                      a record stays where it was made); else the newest
//                                      node that takes part, can keep and does not host the
//                                      other replica, or none: the head's keeper then stands
//                                      in for it in commits (registry.cpp, keepers_of)
//
// A replica's host that leaves (atoll leave, SIGTERM) hands the replica over first, one
// hand-over at a time (decide_handover):
//
//   slot's host draining --a node can take it--> start: keeper/M (a new number) placed on
//        |                                        it, catching up from the leaving replica,
//        |                                        and in every commit; the host is held
//        +--no node can take it--> the host is released (Shutdown); the slot is re-placed
//                                  after its Goodbye, as after a crash
//   pending --incoming caught up (every released round)--> promote: keeper/M takes the
//                                                         slot; the old host is released
//   pending --the old host is gone (crash)--> promote: keeper/M takes the slot as it is
//   pending --the incoming host is gone or draining--> cancel (the next decision may start
//                                                      again on another node)
//   pending --the old host takes part again (it said Hello to a restarted head)--> cancel
//   pending --cluster.handover_ms passed--> the old host is released; promoted at its Goodbye
//
// With keeper groups, a replica on a node another group's replica uses moves to a node
// that keeps nothing, when one takes part (one that joined after the groups were placed),
// by the same hand-over without a draining host ("spreading"):
//
//   slot's host also hosts another group's replica, a node keeps nothing --> start
//        (spreading): keeper/M on that node, catching up from the slot's replica
//   spreading --incoming caught up--> promote: keeper/M takes the slot; the old replica
//                                     is dropped from its host (which stays)
//   spreading --the old host is gone--> promote, as above
//   spreading --the incoming host is gone or draining--> cancel
//   spreading --cluster.handover_ms passed--> cancel (the next decision may start again)
//
// Hosts are "node/N" ids (runtime/core/actor_id.hpp); a stored placement that is not one (a
// damaged snapshot) counts as gone.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/decisions/membership.hpp"

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

// The host of replica keeper `number` (keeper/1, keeper/2, or the number a hand-over gave
// its place) while training: `current` is its host now ("" if none), `avoid` the hosts of
// the other replicas, a hand-over's new one included (two copies on one machine are one
// copy).
// `rather_not`: hosts taken by other keeper groups, chosen only when no other node can keep,
// so that the groups spread over the nodes. `prefer`: hosts taken first, in order, when one
// can keep and is neither avoided nor rather not: the hosts of the coordinators of the
// group's units (preferred_replica_hosts), so that one copy of each record stays on the
// machine that made it and only the other crosses a link (issue 70).
keeper_choice choose_replica_keeper(std::uint32_t number, const std::string& current,
                                    const std::vector<std::string>& avoid, const node_facts& nodes, bool training,
                                    const std::vector<std::string>& rather_not = {},
                                    const std::vector<std::string>& prefer = {});

// The hosts a group's two replica slots prefer: slot 0 the host of the group's first unit's
// coordinator, slot 1 its second unit's (units_of_group order), "" where there is none.
// `placements` holds each unit's coordinator host ("node/N", or "" while unplaced).
std::vector<std::string> preferred_replica_hosts(std::size_t group, std::size_t groups,
                                                 const std::vector<std::string>& placements);

// Keeper groups: group g of G keeps the sync units u with u mod G == g, each with two
// replicas of its own, so a keeper host receives about 1/G of a round's records instead of
// all of them. G is fixed for a run (each group's stores hold its units' round logs).
// One group up to two slices (the run's two replicas, as before groups), else ceil(S/2):
// with a slice per member, 2G replicas are about one per node, each receiving about what a
// slice host sends its keepers (2/S of a fragment a round).
std::size_t keeper_group_count(std::size_t shards);
std::size_t keeper_group_of(std::size_t unit, std::size_t groups);
// The units group `group` keeps, of `units`, in order.
std::vector<std::uint32_t> units_of_group(std::size_t group, std::size_t groups, std::size_t units);

// A replica keeper's place: keeper/<number> on `host` ("" while none). The registry has
// two such slots (the second used with storage.keepers = nodes); a hand-over gives a slot
// a new number, since the old and the new replica run side by side for a while.
struct replica_slot {
  std::uint32_t number = 0;
  std::string host;
  bool operator==(const replica_slot& o) const { return number == o.number && host == o.host; }
};

// A hand-over in progress: `incoming` takes slot `slot` (0 or 1) once it has caught up.
// `spreading`: it moves the slot off a node another keeper group uses (its host stays).
struct replica_handover {
  std::size_t slot = 0;
  replica_slot incoming;
  bool spreading = false;
};

// The keepers every commit needs, given the two slots and a hand-over in progress.
// storage.keepers = head: keeper/0, and the first slot's once placed. nodes: both slots'
// once both are placed, keeper/0 standing in for each one missing, so a committed round is
// on two machines whenever two can hold it. A hand-over's incoming replica takes every
// commit as well, so that it is not behind when it takes the slot.
std::vector<std::string> commit_keepers(bool on_nodes, const std::vector<replica_slot>& slots,
                                        const std::optional<replica_handover>& pending);

struct handover_decision {
  enum class step { none, start, promote, cancel };
  step what = step::none;
  std::size_t slot = 0;  // start: the slot whose host drains
  std::string host;  // start: the incoming replica's host
  std::vector<std::string> release;  // draining nodes that may leave now ("node/N")
  std::string reason;  // for the log; empty with step::none
  bool spreading = false;  // start: to a node that keeps nothing, the slot's host staying
  // A replica to stop on its host, which stays: the old one at a spreading promotion, the
  // incoming one at a cancel whose incoming host still takes part.
  std::optional<replica_slot> drop = std::nullopt;
  bool operator==(const handover_decision& o) const {
    return what == o.what && slot == o.slot && host == o.host && spreading == o.spreading && drop == o.drop &&
           release == o.release && reason == o.reason;
  }
};

// The next step of the hand-over (see the diagram above). `incoming_ready`: the pending
// incoming replica reported every fragment at its released round; `timed_out`: the
// pending hand-over is older than cluster.handover_ms; `other_groups`: the hosts of the
// other keeper groups' replicas (their incoming ones included). Outside training nothing is
// handed over and every draining node is released.
handover_decision decide_handover(const std::vector<replica_slot>& slots,
                                  const std::optional<replica_handover>& pending, const node_facts& nodes,
                                  bool training, bool incoming_ready, bool timed_out,
                                  const std::vector<std::string>& other_groups = {});

// A starting coordinator that asks every keeper it commits to (storage.keepers = nodes,
// where keeper/0 may be behind): `answered` maps each keeper that replied to the round it
// holds (nullopt: none found). Returns the keeper to resume from once every one of
// `keepers` answered: the newest round, the first in `keepers` order on a tie, or any
// keeper when none holds a round (a new run). nullopt while one has not answered yet.
std::optional<std::string> resume_source(const std::vector<std::string>& keepers,
                                         const std::map<std::string, std::optional<std::uint64_t>>& answered);

}  // namespace atl::placement
