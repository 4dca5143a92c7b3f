#pragma once
// The PeerTable as what changed (pure): the registry sends each node the difference between
// the table it published last and the new one, and each tick only a version check, instead
// of the whole table (about 100 bytes a node) to every node every tick, which grew with the
// square of the nodes (issue 45).
//
//   registry: table T(e0) published ... a change ... T(e1):
//               each node of T(e0) <- delta(base e0): nodes added or changed, nodes removed,
//                                     the placements if they changed, digest of T(e1)
//               a node new in T(e1) <- the whole table
//             every tick: each node <- delta(base e1, nothing changed): the version check
//             a PeerTableRequest    <- the whole table
//
//   node:     holds T(b) --delta of base b--> applied; its digest is the sender's --> T(e1)
//                                                  \--digests differ--> needs the whole table
//             holds T(b) --delta of another base--> needs the whole table (one was lost)
//             any        --the whole table--> replaces its own
//
// A node that needs the whole table keeps its own (routes that may be a tick old still
// route) and asks for it; a lost delta is so repaired by the next tick's version check.
//
// The digest is a sum of one hash per node and per placement, mixed with the epoch, so that
// a node checks and applies a delta in what it changes (held_routes): a node of a
// thousand-node cluster does not copy or hash the whole table for each join.
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/transport/peer_routes.hpp"

namespace atl {

struct route_delta {
  bool delta = false;  // false: `table` is the whole table
  std::uint64_t base_epoch = 0;  // the table it changes (a delta)
  route_table table;  // epoch: the new one; nodes: added or changed (a delta), or all
  std::vector<std::uint32_t> removed;  // nodes gone (a delta)
  bool placements_changed = true;  // a delta without them leaves the node's as they are
  std::uint64_t digest = 0;  // routes_digest of the whole table it leads to
};

// A stable 64-bit digest of a whole table: epoch, nodes and placements, whatever their
// order.
std::uint64_t routes_digest(const route_table& table);

// The whole table, as sent to a node that is new or asked for it.
route_delta whole_routes(const route_table& table);
// What changed from `from` to `to` (base: from.epoch); empty when they are equal.
route_delta diff_routes(const route_table& from, const route_table& to);
// The version check of the table of `epoch` with `digest`: a delta that changes nothing.
route_delta version_check(std::uint64_t epoch, std::uint64_t digest);

// Applies a delta that was checked to `table` in place (nodes upserted and removed, the
// epoch, the placements if they changed); returns the endpoints no node has any more, whose
// links may close.
std::set<std::string> apply_delta_in_place(route_table& table, const route_delta& d);

enum class route_verdict { applied, needs_whole_table };

// A node's table with its digest kept as changes are applied: a delta costs what it
// changes, never a copy of the table.
class held_routes {
 public:
  held_routes() = default;
  explicit held_routes(route_table table);
  // A delta of another base, or one that would not reach the sender's digest, leaves the
  // table as it was (needs_whole_table); a whole table replaces it.
  route_verdict apply(const route_delta& d);
  const route_table& table() const { return table_; }
  std::uint64_t digest() const;

 private:
  route_table table_;
  std::uint64_t node_sum_ = 0, placed_sum_ = 0;  // of the entries' hashes
};

// What a node agent hands its links after a PeerTable changed its table (valid during the
// call): the whole table now held, its digest, and the change that made it, so that the
// links too may apply what changed rather than copy the table.
struct routes_update {
  const route_table& table;
  std::uint64_t digest;
  const route_delta& change;
  std::uint32_t self_node;
};

// A node's side of the protocol above: the table it holds, and what to do with each
// PeerTable (pure; the node agent runs the effect). A version check that passes changes
// nothing; a delta it cannot apply asks for the whole table, at most once an interval (the
// deltas that keep coming meanwhile would each ask again).
class route_follower {
 public:
  enum class effect { nothing, hand_table_to_links, ask_for_whole_table };
  effect on_table(const route_delta& d, std::chrono::steady_clock::time_point now,
                  std::chrono::milliseconds ask_interval);
  const route_table& table() const { return routes_.table(); }
  std::uint64_t digest() const { return routes_.digest(); }

 private:
  held_routes routes_;
  std::optional<std::chrono::steady_clock::time_point> asked_;
};

// The PeerTable message: write and read (reading never fails, as read_peer_table).
void write_route_delta(const route_delta& d, schema::PeerTable::Builder out);
route_delta read_route_delta(schema::PeerTable::Reader in);

}  // namespace atl
