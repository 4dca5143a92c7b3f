#pragma once
// One simulated node of `atoll_sim_nodes`: the real node agent and worker over the real
// links to the head (runtime/transport/node_links.hpp), training a stand-in replica
// (standin_replica.hpp). Many of them share one process and one actor system; each has its
// own connection, so the head sees as many nodes as there are.
//
//   running --silence()--> silent: sends nothing (its heartbeats stop), still hears
//   running --leave()----> leaving: told to stop as SIGTERM tells a node (it says Goodbye)
//   any -----close()-----> closed: sends nothing and its connection is closed, as when a
//                          process is killed (no Goodbye); the actors are told to stop
//
// The links stay allocated until the node is destroyed: an actor still stopping may hold
// the transport, and after close() every send is dropped at the gate.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "runtime/transport/node_links.hpp"

namespace atl::sim {

// The node's links behind a gate that silence() and close() shut.
class gated_links : public transport {
 public:
  explicit gated_links(std::unique_ptr<node_links> links);
  void send(const std::string& receiver, wire::frames frames) override;
  bool delivers_in_process(const std::string& id) const override;
  void forget_peer(const std::string& id) override;
  void update_routes(const routes_update& update);
  void silence();
  void close();

 private:
  mutable std::mutex mu_;
  std::unique_ptr<node_links> links_;
  bool silent_ = false;
  bool closed_ = false;
};

struct sim_node_settings {
  node_link_settings links;  // the head, plain TCP or CURVE; no data endpoint: the head relays
  std::string hostname;  // shown by `atollctl members`
  std::size_t values = 1024;  // the stand-in model's fp32 values
  std::chrono::milliseconds step_time{200};
  // Each PeerTable that changed this node's table (the caller's bookkeeping of who is a
  // member). Called on an actor's thread.
  std::function<void(const routes_update&)> on_table;
};

class sim_node {
 public:
  // Connects and spawns the node agent. Throws zmq::error_t when the head cannot be
  // connected to.
  sim_node(caf::actor_system& sys, sim_node_settings settings);
  ~sim_node();
  sim_node(const sim_node&) = delete;
  sim_node& operator=(const sim_node&) = delete;

  void silence();
  void leave();
  void close();

 private:
  directory local_;
  cluster_identity cluster_;
  std::unique_ptr<gated_links> links_;
  caf::actor agent_;
};

}  // namespace atl::sim
