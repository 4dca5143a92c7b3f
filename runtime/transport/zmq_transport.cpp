#include "runtime/transport/zmq_transport.hpp"

#include <chrono>
#include <cstring>

#include <caf/send.hpp>

#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/head_endpoints.hpp"
#include "runtime/transport/peer_routes.hpp"

namespace atl {
namespace {

// The I/O thread is woken by what it must do (wake_io); this bounds a wait all the same.
constexpr int poll_interval_ms = 1000;
constexpr int batch = 256;  // messages taken from a socket between two polls
constexpr int linger_ms = 200;  // pending sends flushed on close, then dropped
std::atomic<int> transport_counter{0};

// Received frames as wire frames. A large one is borrowed, not copied: ZeroMQ allocated
// it for this message alone, aligned for any scalar (a small one may sit at any offset
// in ZeroMQ's shared receive buffer, and is copied).
wire::frames to_frames(std::vector<zmq::message_t>& parts, std::size_t first) {
  constexpr std::size_t borrow_from = 64 << 10;
  wire::frames out;
  out.reserve(parts.size() - first);
  for (std::size_t i = first; i < parts.size(); ++i) {
    const auto* p = static_cast<const std::uint8_t*>(parts[i].data());
    const auto size = parts[i].size();
    if (size >= borrow_from && reinterpret_cast<std::uintptr_t>(p) % alignof(std::uint64_t) == 0) {
      auto owner = std::make_shared<zmq::message_t>();
      owner->copy(parts[i]);  // a second reference to the same bytes: `parts` stays whole for a relay
      out.push_back(wire::bytes::borrowed(p, size, std::move(owner)));
    } else {
      out.emplace_back(p, p + size);
    }
  }
  return out;
}

// A frame handed to ZeroMQ without a copy: the message holds a share of the bytes until
// ZeroMQ has sent them (a fragment's tensor frame is tens of MiB, often the same bytes
// for several receivers).
zmq::message_t take_frame(wire::bytes&& frame) {
  if (frame.size() < 256) return zmq::message_t(frame.data(), frame.size());
  auto* owned = new wire::bytes(std::move(frame));
  // ZeroMQ only reads a message it sends; its API takes a non-const pointer.
  return zmq::message_t(
      const_cast<std::uint8_t*>(owned->data()), owned->size(),
      [](void*, void* hint) { delete static_cast<wire::bytes*>(hint); }, owned);
}

}  // namespace

zmq_transport::zmq_transport(role r, const std::string& endpoint, directory& dir, cluster_identity& cluster,
                             wire::limits lim, const link_security& security, zmq_link_options options)
    : transport(options.counters),
      role_(r),
      options_(options),
      dir_(dir),
      cluster_(cluster),
      limits_(lim),
      own_context_(r == role::client && options.context ? nullptr : std::make_unique<zmq::context_t>(1)),
      ctx_(own_context_ ? *own_context_ : *options.context),
      net_(ctx_, r == role::server ? zmq::socket_type::router : zmq::socket_type::dealer),
      out_pull_(ctx_, zmq::socket_type::pull),
      out_push_(ctx_, zmq::socket_type::push) {
  const int instance = transport_counter++;
  const std::string inproc = "inproc://atoll-out-" + std::to_string(instance);
  out_pull_.bind(inproc);
  out_push_.connect(inproc);
  out_push_.set(zmq::sockopt::linger, 0);
  net_.set(zmq::sockopt::linger, linger_ms);
  // A frame larger than any envelope or tensor we accept makes ZeroMQ drop the peer
  // before it allocates the frame.
  net_.set(zmq::sockopt::maxmsgsize, static_cast<int64_t>(std::max(lim.max_tensor_bytes, lim.max_envelope_bytes)));
  // Failed handshakes (wrong keys, no keys, garbage) are counted from monitor events, and
  // a client counts its connections to the head (the second one is a reconnect).
  const std::string monitor_ep = "inproc://atoll-monitor-" + std::to_string(instance);
  const int connect_events = r == role::client && options.count_connections ? ZMQ_EVENT_CONNECTED : 0;
  // A server that reports closed node connections watches them close.
  const int close_events = r == role::server && options_.on_node_disconnected ? ZMQ_EVENT_DISCONNECTED : 0;
  if (zmq_socket_monitor(net_.handle(), monitor_ep.c_str(),
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | connect_events | close_events) != 0)
    throw zmq::error_t();
  monitor_ = zmq::socket_t(ctx_, zmq::socket_type::pair);
  monitor_.set(zmq::sockopt::linger, 0);
  monitor_.connect(monitor_ep);
  secure_ = security.enabled();
  if (r == role::server) {
    if (secure_) {
      // ZeroMQ asks the handler at this fixed address; it must exist before the bind.
      zap_ = std::make_unique<zap_handler>(ctx_, security.authorized);
      apply_server_security(net_, security);
    }
    net_.set(zmq::sockopt::router_mandatory, 1);
    std::string ep = endpoint;
    // "tcp://host:0" asks for a free port; ZeroMQ spells that "tcp://host:*".
    if (ep.size() > 2 && ep.compare(ep.size() - 2, 2, ":0") == 0) ep = ep.substr(0, ep.size() - 1) + "*";
    net_.bind(ep);
    bound_ = net_.get(zmq::sockopt::last_endpoint);
  } else {
    apply_client_security(net_, security);
    net_.set(zmq::sockopt::reconnect_ivl, 100);
    net_.set(zmq::sockopt::reconnect_ivl_max, 2000);
    connect_to_heads(net_, endpoint);  // "A,B": the heads of a run that fails over
    bound_ = endpoint;
  }
  io_ = std::thread([this] { run(); });
}

zmq_transport::~zmq_transport() { stop(); }

void zmq_transport::stop() {
  if (stopping_.exchange(true)) return;
  wake_io();
  if (io_.joinable()) io_.join();
  zmq_socket_monitor(net_.handle(), nullptr, 0);
  monitor_.close();
  net_.close();
  zap_.reset();
  out_pull_.close();
  std::lock_guard<std::mutex> lock(push_mu_);
  out_push_.close();
}

void zmq_transport::send(const std::string& receiver, wire::frames frames) {
  counters_->messages_out++;
  if (dir_.find(receiver)) {
    if (auto st = deliver_local(std::move(frames), limits_, cluster_, dir_, *counters_))
      log_debug("local delivery to " + receiver + " refused: " + st.describe());
    return;
  }
  if (stopping_) return;
  std::lock_guard<std::mutex> lock(push_mu_);
  out_push_.send(zmq::buffer(receiver), zmq::send_flags::sndmore);
  for (std::size_t i = 0; i < frames.size(); ++i) {
    auto flags = i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
    out_push_.send(take_frame(std::move(frames[i])), flags);
  }
}

void zmq_transport::set_authorized(std::set<std::string> keys) {
  if (zap_) zap_->set_authorized(std::move(keys));
}

void zmq_transport::forget_peer(const std::string& id) {
  {
    std::lock_guard<std::mutex> lock(forget_mu_);
    to_forget_.push_back(id);
  }
  wake_io();
}

void zmq_transport::wake_io() {
  std::lock_guard<std::mutex> lock(push_mu_);
  if (out_push_) out_push_.send(zmq::message_t(), zmq::send_flags::dontwait);  // on_outgoing ignores it
}

void zmq_transport::apply_forgotten_peers() {
  std::vector<std::string> ids;
  {
    std::lock_guard<std::mutex> lock(forget_mu_);
    ids.swap(to_forget_);
  }
  for (const auto& id : ids) {
    auto route = routes_.find(id);
    if (route != routes_.end()) heard_.erase(route->second);  // its connection no longer counts as live
  }
}

void zmq_transport::run() {
  std::vector<zmq::pollitem_t> items = {{static_cast<void*>(net_), 0, ZMQ_POLLIN, 0},
                                        {static_cast<void*>(out_pull_), 0, ZMQ_POLLIN, 0},
                                        {static_cast<void*>(monitor_), 0, ZMQ_POLLIN, 0}};
  if (zap_) items.push_back({static_cast<void*>(zap_->socket()), 0, ZMQ_POLLIN, 0});
  // Messages actors queued before stop() still go out (a result a peer waits for, a
  // final report); the socket's linger then gives them time to leave the process.
  const auto drain = [this] {
    std::vector<zmq::message_t> parts;
    while (zmq::recv_multipart(out_pull_, std::back_inserter(parts), zmq::recv_flags::dontwait)) {
      on_outgoing(parts);
      parts.clear();
    }
  };
  while (!stopping_) {
    try {
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(poll_interval_ms));
      // What is waiting is taken in batches, one poll for many messages: a head that hears
      // from a thousand nodes a second would otherwise poll once a message.
      std::vector<zmq::message_t> parts;
      if (items[0].revents & ZMQ_POLLIN)
        for (int i = 0; i < batch && zmq::recv_multipart(net_, std::back_inserter(parts), zmq::recv_flags::dontwait);
             ++i, parts.clear())
          on_network_message(parts);
      if (items[1].revents & ZMQ_POLLIN)
        for (int i = 0;
             i < batch && zmq::recv_multipart(out_pull_, std::back_inserter(parts), zmq::recv_flags::dontwait);
             ++i, parts.clear())
          on_outgoing(parts);
      if (items[2].revents & ZMQ_POLLIN) on_monitor_event();
      apply_forgotten_peers();
      if (zap_ && (items[3].revents & ZMQ_POLLIN)) {
        switch (zap_->handle()) {
          case zap_handler::verdict::admitted: counters_->auth_admitted++; break;
          case zap_handler::verdict::denied:
            counters_->auth_denied++;
            log_warn("transport: refused a client whose key is not authorized");
            break;
          case zap_handler::verdict::none: break;
        }
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      log_warn(std::string("transport: ") + e.what());
    }
  }
  try {
    drain();
  } catch (const zmq::error_t& e) {
    log_warn(std::string("transport: while draining: ") + e.what());
  }
}

void zmq_transport::on_monitor_event() {
  std::vector<zmq::message_t> parts;
  if (!zmq::recv_multipart(monitor_, std::back_inserter(parts), zmq::recv_flags::dontwait) || parts.size() < 2 ||
      parts[0].size() < sizeof(std::uint16_t))
    return;
  std::uint16_t event = 0;
  std::memcpy(&event, parts[0].data(), sizeof event);
  if (event == ZMQ_EVENT_CONNECTED) {
    counters_->connections++;
    return;
  }
  if (event == ZMQ_EVENT_DISCONNECTED) {
    std::uint32_t fd = 0;  // the event's value: the closed connection's descriptor
    if (parts[0].size() >= sizeof event + sizeof fd) std::memcpy(&fd, parts[0].data<char>() + sizeof event, sizeof fd);
    on_connection_closed(static_cast<int>(fd));
    return;
  }
  counters_->handshakes_failed++;
  if (role_ == role::client && event != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL) handshake_refused_ = true;
  const char* what = event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH       ? "authentication failed"
                     : event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL ? "protocol error (security mismatch?)"
                                                                    : "connection dropped";
  // A client that cannot authenticate says so loudly: it will never get in.
  const std::string text = "transport: handshake with " + parts[1].to_string() + " failed: " + what;
  if (role_ == role::client) log_warn(text + "; check --keys");
  else log_debug(text);
}

void zmq_transport::on_network_message(std::vector<zmq::message_t>& parts) {
  std::string identity;
  std::size_t first = 0;
  if (role_ == role::server) {
    if (parts.size() < 2) return;
    identity = parts[0].to_string();
    first = 1;
  }
  std::size_t size = 0;
  for (std::size_t i = first; i < parts.size(); ++i) size += parts[i].size();
  // Set by our ZAP handler to the client's key; absent on plain TCP and on clients.
  const char* key = parts.size() > first ? zmq_msg_gets(parts[first].handle(), "User-Id") : nullptr;
  auto decoded = wire::decode(to_frames(parts, first), limits_, key ? key : "");
  if (!decoded) {
    counters_->count_refusal(decoded.err().code);
    log_debug("ingress refused " + std::to_string(size) + " bytes: " + decoded.err().describe());
    return;
  }
  const auto& msg = **decoded;
  if (auto st = wire::check_cluster(msg, cluster_.get())) {
    counters_->count_refusal(st.code);
    log_debug("ingress refused message from " + msg.sender() + ": " + st.describe());
    return;
  }
  if (options_.senders) {
    if (auto st = options_.senders->check(msg.sender(), msg.peer_key())) {
      counters_->count_refusal(st.code);
      log_debug("ingress refused a " + std::string(wire::kind_name(msg.kind())) + ": " + st.describe());
      return;
    }
  }
  if (role_ == role::server && options_.relay) {
    if (auto st = learn_route(msg.sender(), identity)) {
      counters_->count_refusal(st.code);
      log_debug("ingress refused: " + st.describe());
      return;
    }
  }
  if (role_ == role::server && options_.on_node_disconnected) note_node_connection(msg.sender(), parts[first]);
  if (auto target = dir_.find(msg.receiver())) {
    counters_->messages_in++;
    counters_->bytes_in += size;
    counters_->tensor_bytes_in += size - parts[first].size();  // the frames behind the envelope
    counters_->kind_bytes_in[traffic_counters::kind_slot(msg.kind())] += size;
    traffic_counters::note_largest(counters_->kind_largest_envelope_in[traffic_counters::kind_slot(msg.kind())],
                                   parts[first].size());
    caf::anon_send(target, *decoded);
    return;
  }
  if (role_ == role::server && options_.relay) {  // relay to another connected process
    auto to = route_for(msg.receiver());
    if (!to.empty()) {
      std::vector<zmq::message_t> relay;
      for (std::size_t i = first; i < parts.size(); ++i) relay.push_back(std::move(parts[i]));
      counters_->bytes_relayed += size;
      counters_->tensor_bytes_relayed += size - relay.front().size();  // the frames behind the envelope
      log_debug("relayed a " + std::string(wire::kind_name(msg.kind())) + " of " + std::to_string(size) +
                " bytes from " + msg.sender() + " to " + msg.receiver());
      send_frames(to, relay);
      return;
    }
  }
  counters_->count_refusal(errc::unknown_peer);
  log_debug("no actor '" + msg.receiver() + "' for a " + wire::kind_name(msg.kind()) + " from " + msg.sender());
}

void zmq_transport::note_node_connection(const std::string& sender, const zmq::message_t& part) {
  if (!node_of(sender)) return;  // nodes only: control clients come and go by design
  // ZMQ_SRCFD: deprecated in ZeroMQ 4.3 for want of a better handle, and still the only
  // link between a received message and the connection a DISCONNECTED event names.
  const int fd = zmq_msg_get(const_cast<zmq_msg_t*>(part.handle()), ZMQ_SRCFD);
  if (fd >= 0) node_connections_[sender] = fd;
}

void zmq_transport::on_connection_closed(int fd) {
  for (auto it = node_connections_.begin(); it != node_connections_.end();) {
    if (it->second != fd) {
      ++it;
      continue;
    }
    const std::string node = it->first;
    it = node_connections_.erase(it);
    options_.on_node_disconnected(node);
  }
}

status zmq_transport::learn_route(const std::string& sender, const std::string& identity) {
  const auto now = std::chrono::steady_clock::now();
  const bool control_client = is_kind(sender, actor_kind::control);
  auto held = routes_.find(sender);
  if (!control_client && held != routes_.end() && held->second != identity) {
    auto last = heard_.find(held->second);
    if (last != heard_.end() && now - last->second < std::chrono::milliseconds(takeover_ms_.load()))
      return make_error(errc::sender_conflict, "'" + sender + "' already speaks from another live connection");
  }
  // Non-control ids are actors of members; a member inventing ids must not grow the table
  // without bound.
  if (!control_client && held == routes_.end() && routes_.size() >= max_routes)
    return make_error(errc::unknown_peer,
                      "route table full (" + std::to_string(max_routes) + " ids); '" + sender + "' not learned");
  heard_[identity] = now;
  if (heard_.size() > 4 * max_client_routes) {  // forget connections silent for long
    for (auto it = heard_.begin(); it != heard_.end();)
      it = now - it->second > 6 * std::chrono::milliseconds(takeover_ms_.load()) ? heard_.erase(it) : std::next(it);
  }
  auto [it, added] = routes_.insert_or_assign(sender, identity);
  (void)it;
  if (added && control_client) {
    client_routes_.push_back(sender);
    if (client_routes_.size() > max_client_routes) {
      routes_.erase(client_routes_.front());
      client_routes_.pop_front();
    }
  }
  route_count_ = routes_.size();
  return {};
}

std::string zmq_transport::route_for(const std::string& receiver) const {
  auto it = routes_.find(receiver);
  if (it != routes_.end()) return it->second;
  // worker/N.K lives on node/N (one parse: this is on the relay path of every tensor).
  const auto id = parse_actor_id(receiver);
  if (id && id->kind == actor_kind::worker) {
    auto node = routes_.find(node_actor_id(id->number));
    if (node != routes_.end()) return node->second;
  }
  return {};
}

void zmq_transport::on_outgoing(std::vector<zmq::message_t>& parts) {
  if (parts.size() < 2) return;
  const std::string receiver = parts[0].to_string();
  std::vector<zmq::message_t> frames;
  for (std::size_t i = 1; i < parts.size(); ++i) frames.push_back(std::move(parts[i]));
  if (role_ == role::client) {
    send_frames({}, frames);
    return;
  }
  auto to = route_for(receiver);
  if (to.empty()) {
    counters_->unroutable++;
    log_debug("no route to " + receiver);
    return;
  }
  std::size_t tensor_bytes = 0;  // counted before the send empties the frames
  for (std::size_t i = 1; i < frames.size(); ++i) tensor_bytes += frames[i].size();
  if (send_frames(to, frames)) counters_->tensor_bytes_out += tensor_bytes;
}

bool zmq_transport::send_frames(const std::string& identity, std::vector<zmq::message_t>& frames) {
  std::size_t size = 0;
  for (auto& f : frames) size += f.size();
  // Never blocks the I/O thread: with the peer gone (a head restarting) a full queue drops
  // the message, which the protocols resend. ZeroMQ accepts or refuses a multipart message
  // whole at its first frame.
  const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
  try {
    if (role_ == role::server && !net_.send(zmq::buffer(identity), more)) {
      counters_->unroutable++;
      return false;
    }
    for (std::size_t i = 0; i < frames.size(); ++i) {
      const bool last = i + 1 == frames.size();
      if (!net_.send(frames[i], last ? zmq::send_flags::dontwait : more)) {
        counters_->unroutable++;
        return false;
      }
    }
    counters_->bytes_out += size;
    return true;
  } catch (const zmq::error_t& e) {
    // EHOSTUNREACH: the peer disconnected (ROUTER_MANDATORY); the protocol times out.
    counters_->unroutable++;
    log_debug(std::string("send failed: ") + e.what());
    return false;
  }
}

}  // namespace atl
