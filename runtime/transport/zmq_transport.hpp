#pragma once
// ZeroMQ transport between real processes.
//
// The head binds a ROUTER; nodes and atollctl connect DEALERs to it. Each transport owns
// one I/O thread, the only thread that touches the network socket (ZeroMQ sockets are not
// thread-safe). Actors on any thread call send(): frames for a local actor are delivered
// in-process (an optimisation; they still pass the full ingress), the rest travel through
// an inproc PUSH/PULL pair to the I/O thread.
//
// Routing on the ROUTER side: the route to an actor id is the connection its last valid
// message came from; "worker/N.K" falls back to the route of "node/N". A message for an
// actor that is neither local nor routable is counted as unroutable and dropped. A
// message that arrives for an actor that is not local but routable is relayed.
// On the DEALER side every non-local message goes to the head.
// Control clients (ids "ctl/...") make one request each; only the newest
// max_client_routes of their routes are kept, so a head polled for days stays bounded.
// A sender id belongs to the connection it was learned from while that connection is
// live (heard within route_takeover): another connection that claims it is refused with
// sender_conflict, so one peer cannot steal the results meant for another's actors.
// After that silence (a dead or restarted node) the id may move.
//
// A node's data endpoint (runtime/transport/node_links.hpp) is a server that relays nothing.
//
// Closed connections: the head's server names the node whose connection closed
// (zmq_link_options::on_node_disconnected), so that a killed process is seen at once
// rather than at its lease; the registry confirms it (actors/decisions/liveness.hpp).
//
// Security (runtime/transport/security.hpp): with keys, the server socket is a CURVE server whose
// ZAP handler (polled on the I/O thread) admits only authorized client keys, and clients
// authenticate the server by its public key. Each message then carries the key its
// connection authenticated (wire::message::peer_key), and with `senders` set a sender id
// that key may not speak for is refused (errc::sender_conflict). A monitor counts failed handshakes. Without
// keys the link is plain TCP; the launcher allows that only on loopback or with --insecure.
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "runtime/transport/security.hpp"
#include "runtime/transport/transport.hpp"

namespace atl {

class shared_routes;

// How one link behaves beyond its role; the defaults are the head's and a node's link to it.
struct zmq_link_options {
  // Server: relay a message for an actor that is not local to the connection that speaks
  // for it. A node's data endpoint delivers to its own actors only.
  bool relay = true;
  // Client: count connections (a second one means the head restarted; node agents watch it).
  bool count_connections = true;
  // Count into another transport's counters (the node's links share one set).
  traffic_counters* counters = nullptr;
  // Server with CURVE: refuse a message whose sender id the link's key may not speak for
  // (runtime/transport/peer_routes.hpp check_sender). Null: no identity check.
  const shared_routes* senders = nullptr;
  // Server: called on the I/O thread with "node/N" when the connection node/N last spoke
  // from closes (a killed process closes its connections at once). A hint, not a verdict:
  // the connection may come back (the registry asks the node to answer; actors/decisions/liveness.hpp).
  std::function<void(const std::string& node)> on_node_disconnected;
  // Client: a ZeroMQ context to share instead of one of its own (with its I/O thread). The
  // scale bench's simulated nodes share one; it must outlive the link. A server with CURVE
  // keeps its own: ZeroMQ allows one ZAP handler a context.
  zmq::context_t* context = nullptr;
};

class zmq_transport : public transport {
 public:
  enum class role { server, client };

  // server: binds `endpoint` (a port of 0 or '*' picks a free one; see bound_endpoint()).
  // client: connects to `endpoint`.
  zmq_transport(role r, const std::string& endpoint, directory& dir, cluster_identity& cluster, wire::limits lim = {},
                const link_security& security = {}, zmq_link_options options = {});
  ~zmq_transport() override;
  zmq_transport(const zmq_transport&) = delete;
  zmq_transport& operator=(const zmq_transport&) = delete;

  void send(const std::string& receiver, wire::frames frames) override;
  bool delivers_in_process(const std::string& id) const override { return dir_.contains(id); }
  void forget_peer(const std::string& id) override;
  std::string bound_endpoint() const { return bound_; }
  // Server with CURVE: the client keys admitted from now on (connections made stay).
  void set_authorized(std::set<std::string> keys);
  bool secure() const { return secure_; }
  static constexpr std::size_t max_client_routes = 256;
  static constexpr std::size_t max_routes = 16384;  // actor ids of members (nodes, workers, coordinators)
  // A connection silent this long may lose its ids to another. Set it between the
  // heartbeat interval and the lease: below the lease, so that a coordinator re-placed
  // after its node's lease expired can speak for its id at once.
  void set_route_takeover(std::chrono::milliseconds after) { takeover_ms_ = after.count(); }
  // Routes known to the I/O thread (approximate while it runs; for tests and status).
  std::size_t route_count() const { return route_count_.load(); }
  // Client: the server refused our handshake (its ZAP handler did not admit our key yet, or
  // keys mismatch). ZeroMQ does not reconnect after that: the link is dead for good.
  bool handshake_refused() const { return handshake_refused_.load(); }
  void stop();

 private:
  void run();
  void on_network_message(std::vector<zmq::message_t>& parts);
  void on_outgoing(std::vector<zmq::message_t>& parts);
  void on_monitor_event();
  std::string route_for(const std::string& receiver) const;
  bool send_frames(const std::string& identity, std::vector<zmq::message_t>& frames);  // false: dropped

  role role_;
  zmq_link_options options_;
  directory& dir_;
  cluster_identity& cluster_;
  wire::limits limits_;
  std::unique_ptr<zmq::context_t> own_context_;  // null when options_.context is shared
  zmq::context_t& ctx_;
  std::unique_ptr<zap_handler> zap_;  // server with keys; bound before net_ binds
  zmq::socket_t net_;
  zmq::socket_t monitor_;
  bool secure_ = false;
  zmq::socket_t out_pull_;
  std::mutex push_mu_;
  zmq::socket_t out_push_;  // guarded by push_mu_
  std::string bound_;
  // Binds `sender` to the connection `identity`; an error if another live one holds it.
  status learn_route(const std::string& sender, const std::string& identity);

  std::unordered_map<std::string, std::string> routes_;  // I/O thread only
  std::deque<std::string> client_routes_;  // "ctl/..." ids, oldest first; I/O thread only
  std::unordered_map<std::string, std::chrono::steady_clock::time_point> heard_;  // connection -> last message
  // "node/N" -> the file descriptor of the connection it last spoke from; I/O thread only.
  // ZeroMQ names a closed connection by its descriptor (ZMQ_EVENT_DISCONNECTED).
  std::unordered_map<std::string, int> node_connections_;
  void note_node_connection(const std::string& sender, const zmq::message_t& part);
  void on_connection_closed(int fd);
  std::atomic<std::size_t> route_count_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> handshake_refused_{false};
  std::atomic<long> takeover_ms_{10000};
  std::mutex forget_mu_;
  std::vector<std::string> to_forget_;  // guarded by forget_mu_; applied on the I/O thread
  void apply_forgotten_peers();
  // A message of one empty frame to the I/O thread, which waits in poll() until something
  // arrives: stop() and forget_peer() need it to look now.
  void wake_io();
  std::thread io_;
};

}  // namespace atl
