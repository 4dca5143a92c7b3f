#pragma once
// Where a message goes, and who may send it: the pure decisions of the data plane.
//
// The registry knows which node hosts each actor (workers by their id, coordinators and the
// keeper replica by placement) and where each node listens for tensors. It sends that as a
// PeerTable to every node; a node then sends tensor-bearing messages straight to the host,
// and everything else (the registry, keeper/0, atollctl, a node that does not listen)
// through the head, as before.
//
//   choose_route(table, self, receiver) -> via_head | direct(node, endpoint, key)
//   check_sender(table, sender, peer_key) -> ok | sender_conflict
//
// Identity: with per-node keys (`atoll keygen --client NAME`), the key a link authenticated
// is bound to the node that said Hello with it, and speaks only for that node's ids: node/N,
// worker/N.K, and the coordinators and keeper placed on N. A key shared by several nodes
// (the cluster's client.key) speaks for any of them: shared keys authenticate the cluster,
// not a node. Without CURVE there are no keys and no identities.
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "runtime/core/expected.hpp"
#include "schema/envelope.capnp.h"

namespace atl {

struct peer_node {
  std::string endpoint;  // data endpoint; empty: the node is relayed by the head
  std::string public_key;  // Z85 key it authenticated with; empty without CURVE

  bool operator==(const peer_node& o) const { return endpoint == o.endpoint && public_key == o.public_key; }
};

struct route_table {
  std::uint64_t epoch = 0;  // the registry's epoch when it was made
  std::map<std::uint32_t, peer_node> nodes;  // nodes that take part
  std::map<std::string, std::uint32_t> placed;  // coord/F and keeper/1 -> host node

  bool operator==(const route_table& o) const { return epoch == o.epoch && nodes == o.nodes && placed == o.placed; }

  // The node `id` lives on: node/N and worker/N.K by their id, coordinators and keeper
  // replicas by placement; nullopt for the head's actors and for anything unknown.
  std::optional<std::uint32_t> host_of(std::string_view id) const;
};

struct route {
  enum class kind { via_head, direct };
  kind how = kind::via_head;
  std::uint32_t node = 0;
  std::string endpoint;
  std::string public_key;  // the server key to expect at `endpoint`

  bool operator==(const route& o) const {
    return how == o.how && node == o.node && endpoint == o.endpoint && public_key == o.public_key;
  }
};

// How this node (`self_node`; 0 before its Welcome) reaches `receiver`, which is not local.
// Direct only to a listening node other than itself; the head otherwise.
route choose_route(const route_table& table, std::uint32_t self_node, std::string_view receiver);

// Whether a tensor-bearing message to `receiver` should wait for the next table rather
// than take the head: `receiver` is a coordinator or keeper whose placed host has left the
// table (it is being placed elsewhere, and the registry's next table, at most a tick away,
// names the new host; a request from it may well arrive before that table does).
bool awaits_new_placement(const route_table& table, std::string_view receiver);

// Whether `peer_key` may send as `sender` (see the header comment). Keys the table does not
// bind to any node may speak only for ids that no member owns yet: node/pending-*, ctl/*,
// and node/N of a node whose key is not known here.
status check_sender(const route_table& table, std::string_view sender, std::string_view peer_key);

// The table as the PeerTable message carries it, and back. Reading never fails: hosts that
// are not node ids are skipped (such a table routes those ids through the head).
void write_peer_table(const route_table& table, schema::PeerTable::Builder out);
route_table read_peer_table(schema::PeerTable::Reader in);

// A route table shared between the actor that learns it and the I/O threads that read it.
class shared_routes {
 public:
  void set(route_table table) {
    std::lock_guard<std::mutex> lock(mu_);
    table_ = std::move(table);
  }
  // Changes the table in place under the lock (a delta applied in what it changes).
  template <class Change>
  void update(Change&& change) {
    std::lock_guard<std::mutex> lock(mu_);
    change(table_);
  }
  route_table get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return table_;
  }
  route choose(std::uint32_t self_node, std::string_view receiver) const {
    std::lock_guard<std::mutex> lock(mu_);
    return choose_route(table_, self_node, receiver);
  }
  bool awaits(std::string_view receiver) const {
    std::lock_guard<std::mutex> lock(mu_);
    return awaits_new_placement(table_, receiver);
  }
  status check(std::string_view sender, std::string_view peer_key) const {
    std::lock_guard<std::mutex> lock(mu_);
    return check_sender(table_, sender, peer_key);
  }

 private:
  mutable std::mutex mu_;
  route_table table_;
};

}  // namespace atl
