#include "runtime/transport/node_links.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "runtime/process/log.hpp"
#include "runtime/transport/head_endpoints.hpp"

namespace atl {
namespace {

// "tcp://HOST:PORT" -> {HOST, PORT}; empty HOST when it is not of that form.
std::pair<std::string, std::string> split_tcp(const std::string& endpoint) {
  const std::string scheme = "tcp://";
  if (endpoint.compare(0, scheme.size(), scheme) != 0) return {};
  const auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon < scheme.size()) return {};
  return {endpoint.substr(scheme.size(), colon - scheme.size()), endpoint.substr(colon + 1)};
}

}  // namespace

std::string advertised_endpoint(const std::string& bound, const std::string& host) {
  const auto [bound_host, port] = split_tcp(bound);
  if (bound_host.empty() || port.empty()) return {};
  const bool wildcard = bound_host == "0.0.0.0" || bound_host == "*" || bound_host == "[::]" || bound_host == "::";
  return "tcp://" + (wildcard ? host : bound_host) + ":" + port;
}

std::string local_address_towards(const std::string& endpoints) {
  const std::string fallback = "127.0.0.1";
  const auto heads = split_endpoints(endpoints);  // several heads: the first is as good a guide as any
  const auto [host, port] = split_tcp(heads.empty() ? std::string() : heads.front());
  if (host.empty()) return fallback;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0 || !found) return fallback;
  std::string address = fallback;
  // A UDP connect sends nothing; it only asks the kernel which source address it would use.
  const int fd = ::socket(AF_INET, SOCK_DGRAM, 0);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0) {
    sockaddr_in local{};
    socklen_t len = sizeof local;
    char text[INET_ADDRSTRLEN] = {0};
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) == 0 &&
        ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text))
      address = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

node_links::node_links(node_link_settings settings, directory& dir, cluster_identity& cluster)
    : settings_(std::move(settings)), dir_(dir), cluster_(cluster) {
  zmq_link_options head_options;
  head_options.counters = counters_;
  head_options.context = settings_.context;
  head_ = std::make_unique<zmq_transport>(zmq_transport::role::client, settings_.head, dir_, cluster_, settings_.limits,
                                          settings_.security, head_options);
  if (settings_.listen.empty()) return;
  link_security server;
  server.own = settings_.security.own;  // no member is admitted until the first route table
  zmq_link_options data_options;
  data_options.relay = false;
  data_options.counters = counters_;
  data_options.senders = server.enabled() ? &routes_ : nullptr;
  data_ = std::make_unique<zmq_transport>(zmq_transport::role::server, settings_.listen, dir_, cluster_,
                                          settings_.limits, server, data_options);
  data_endpoint_ = advertised_endpoint(data_->bound_endpoint(), local_address_towards(settings_.head));
}

node_links::~node_links() { stop(); }

void node_links::stop() {
  head_->stop();
  if (data_) data_->stop();
  std::lock_guard<std::mutex> lock(peers_mu_);
  for (auto& [_, link] : peers_) link->stop();
}

void node_links::send(const std::string& receiver, wire::frames frames) {
  if (dir_.find(receiver)) {  // the head link delivers local messages in-process
    head_->send(receiver, std::move(frames));
    return;
  }
  const auto to = routes_.choose(self_node_.load(), receiver);
  if (to.how == route::kind::direct) {
    peer_link(to)->send(receiver, std::move(frames));
    return;
  }
  // A reply to a coordinator that was just re-placed would cross the head twice (in and
  // out, its tensors relayed): it waits for the table that names the new host.
  if (frames.size() > 1 && routes_.awaits(receiver)) {
    std::lock_guard<std::mutex> lock(parked_mu_);
    parked_.emplace_back(receiver, std::move(frames));
    return;
  }
  head_->send(receiver, std::move(frames));
}

void node_links::send_parked() {
  std::vector<std::pair<std::string, wire::frames>> parked;
  {
    std::lock_guard<std::mutex> lock(parked_mu_);
    parked.swap(parked_);
  }
  // Each goes by the new table, or through the head if it still names no host: never
  // parked twice, so none waits longer than one table.
  for (auto& [receiver, frames] : parked) {
    const auto to = routes_.choose(self_node_.load(), receiver);
    if (to.how == route::kind::direct) peer_link(to)->send(receiver, std::move(frames));
    else head_->send(receiver, std::move(frames));
  }
}

std::shared_ptr<zmq_transport> node_links::peer_link(const route& to) {
  std::lock_guard<std::mutex> lock(peers_mu_);
  auto it = peers_.find(to.endpoint);
  const auto now = std::chrono::steady_clock::now();
  if (it != peers_.end() && peer_keys_[to.endpoint] == to.public_key) {
    // A peer whose route table lagged ours refused our key, and ZeroMQ never retries a
    // refused handshake: make a new link, at most every retry_refused_after (what was
    // sent meanwhile is lost; the protocols resend).
    if (!it->second->handshake_refused() || now - made_at_[to.endpoint] < retry_refused_after) return it->second;
    log_info("direct link to node " + std::to_string(to.node) + " was refused; connecting again");
  }
  link_security client;
  if (settings_.security.enabled()) {
    client.own = settings_.security.own;
    client.server_public_key = to.public_key;
  }
  zmq_link_options options;
  options.count_connections = false;
  options.counters = counters_;
  options.context = settings_.context;
  auto link = std::make_shared<zmq_transport>(zmq_transport::role::client, to.endpoint, dir_, cluster_,
                                              settings_.limits, client, options);
  log_info("direct link to node " + std::to_string(to.node) + " at " + to.endpoint);
  peer_keys_[to.endpoint] = to.public_key;
  made_at_[to.endpoint] = now;
  peers_[to.endpoint] = link;  // a replaced link (new key at the same address) closes with its last user
  return link;
}

void node_links::update_routes(route_table table, std::uint32_t self_node) {
  self_node_ = self_node;
  std::set<std::string> endpoints;
  for (const auto& [_, peer] : table.nodes)
    if (!peer.endpoint.empty()) endpoints.insert(peer.endpoint);
  admit_members(table);
  routes_.set(std::move(table));
  send_parked();
  close_links_where([&](const std::string& endpoint) { return !endpoints.count(endpoint); });
}

void node_links::update_routes(const routes_update& update) {
  if (!update.change.delta) return update_routes(update.table, update.self_node);
  self_node_ = update.self_node;
  const bool members_changed = !update.change.table.nodes.empty() || !update.change.removed.empty();
  if (members_changed) admit_members(update.table);
  std::set<std::string> gone;
  routes_.update([&](route_table& table) { gone = apply_delta_in_place(table, update.change); });
  send_parked();
  if (!gone.empty()) close_links_where([&](const std::string& endpoint) { return gone.count(endpoint) > 0; });
}

void node_links::admit_members(const route_table& table) {
  if (!data_) return;  // only a listening node admits peers
  std::set<std::string> member_keys;
  for (const auto& [_, peer] : table.nodes)
    if (!peer.public_key.empty()) member_keys.insert(peer.public_key);
  data_->set_authorized(std::move(member_keys));
}

void node_links::close_links_where(const std::function<bool(const std::string& endpoint)>& gone) {
  std::vector<std::shared_ptr<zmq_transport>> closed;  // closed outside the lock (or by their last sender)
  std::lock_guard<std::mutex> lock(peers_mu_);
  for (auto it = peers_.begin(); it != peers_.end();) {
    if (!gone(it->first)) {
      ++it;
      continue;
    }
    log_info("direct link to " + it->first + " closed: the node left the route table");
    peer_keys_.erase(it->first);
    made_at_.erase(it->first);
    closed.push_back(std::move(it->second));
    it = peers_.erase(it);
  }
}

}  // namespace atl
