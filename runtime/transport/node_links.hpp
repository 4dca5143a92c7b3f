#pragma once
// A node's links (`atoll join`): tensors go node to node, control goes through the head.
//
//   head link   DEALER to the head: registry, keeper/0, atollctl, and every message for a
//               node that does not listen (the head relays it)
//   data end    ROUTER on --listen: peers deliver to this node's actors; it relays nothing
//   peer links  one DEALER per listening peer, made on first use, dropped when the peer
//               leaves the route table, made again when the peer refused our handshake
//               (its table did not list us yet)
//
//   send(receiver): local actor         -> delivered in-process
//                   choose_route direct -> that peer's data endpoint
//                   tensors for a coordinator or keeper whose host left the table
//                                       -> parked until the next table (at most a tick),
//                                          then sent by it (awaits_new_placement)
//                   otherwise           -> the head
//
// The route table comes from the registry (PeerTable, runtime/transport/peer_routes.hpp). Until the
// first one arrives, and for any id it does not place, messages take the head as before.
// With CURVE, the data endpoint uses this node's own key pair as its server key, admits the
// keys of the current members only, and checks every sender id against the key of the
// connection it came on; peers authenticate it by the key the registry advertised.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/transport/peer_routes.hpp"
#include "runtime/transport/route_delta.hpp"
#include "runtime/transport/security.hpp"
#include "runtime/transport/zmq_transport.hpp"

namespace atl {

struct node_link_settings {
  std::string head;  // the head's endpoint
  std::string listen;  // data endpoint to bind ("tcp://HOST:0" picks a port); empty: relayed
  link_security security;  // this node's key pair and the head's public key; disabled: plain TCP
  wire::limits limits;
  // A ZeroMQ context for the links this node opens (zmq_link_options::context); null: each
  // has its own.
  zmq::context_t* context = nullptr;
};

class node_links : public transport {
 public:
  // Throws zmq::error_t when the head cannot be connected to or the data endpoint bound.
  node_links(node_link_settings settings, directory& dir, cluster_identity& cluster);
  ~node_links() override;
  node_links(const node_links&) = delete;
  node_links& operator=(const node_links&) = delete;

  void send(const std::string& receiver, wire::frames frames) override;
  bool delivers_in_process(const std::string& id) const override { return dir_.contains(id); }
  // The registry's latest PeerTable; `self_node` is this node's id. Thread-safe.
  void update_routes(route_table table, std::uint32_t self_node);
  // The same from what changed (the node agent's PeerTable handling): a delta is applied in
  // place, in what it changes, unless this node listens and its admitted keys change.
  void update_routes(const routes_update& update);
  // Where peers reach this node (the bound data endpoint); empty when it does not listen.
  std::string data_endpoint() const { return data_endpoint_; }
  bool secure() const { return settings_.security.enabled(); }
  void stop();

 private:
  // Shared: a sender may still hold a link that a new route table just dropped.
  std::shared_ptr<zmq_transport> peer_link(const route& to);
  // What send() parked, sent by the table just set.
  void send_parked();
  // Closes the links to the endpoints `gone` says no node has any more.
  void close_links_where(const std::function<bool(const std::string& endpoint)>& gone);
  void admit_members(const route_table& table);

  node_link_settings settings_;
  directory& dir_;
  cluster_identity& cluster_;
  shared_routes routes_;
  std::atomic<std::uint32_t> self_node_{0};
  std::unique_ptr<zmq_transport> head_;
  std::unique_ptr<zmq_transport> data_;  // null with --no-listen
  std::string data_endpoint_;
  std::mutex peers_mu_;
  std::map<std::string, std::shared_ptr<zmq_transport>> peers_;  // by endpoint; guarded by peers_mu_
  std::map<std::string, std::string> peer_keys_;  // endpoint -> server key its link expects
  std::map<std::string, std::chrono::steady_clock::time_point> made_at_;  // endpoint -> when its link was made
  std::mutex parked_mu_;
  std::vector<std::pair<std::string, wire::frames>> parked_;  // receiver, frames; guarded by parked_mu_
  static constexpr std::chrono::milliseconds retry_refused_after{500};
};

// The endpoint to advertise for a bound one: a wildcard host (0.0.0.0, *, ::) is replaced by
// `host`, the address this machine uses towards the head. "" if `bound` is not tcp://H:P.
std::string advertised_endpoint(const std::string& bound, const std::string& host);

// The local address the kernel would use to reach the host of `endpoints` (tcp://HOST:PORT,
// the first of several);
// "127.0.0.1" if that cannot be found.
std::string local_address_towards(const std::string& endpoints);

}  // namespace atl
