#pragma once
// CurveZMQ keys and the ZAP handler that admits only the cluster's clients.
//
// The head is the CURVE server of the control links (nodes and atollctl connect to it).
// A node's data endpoint (runtime/transport/node_links.hpp) is a CURVE server too, with the node's
// own key pair, admitting the keys of the current members only. A key folder made by
// `atoll keygen` holds:
//   head.key         head's public and secret key      (read by `atoll up`)
//   head.pub         head's public key                 (read by clients)
//   client.key       the cluster's client key pair     (read by `atoll join`, atollctl)
//   authorized_keys  client public keys the head admits, one Z85 key per line
// Keys are Z85 text (40 characters). Secret files are written mode 0600.
#include <cstdint>
#include <mutex>
#include <set>
#include <string>

#include <zmq.hpp>

#include "runtime/core/expected.hpp"

namespace atl {

struct curve_keypair {
  std::string public_key;  // Z85
  std::string secret_key;  // Z85
};

// What one end of a link needs. Disabled (plain TCP) when `own` is empty.
struct link_security {
  curve_keypair own;
  std::string server_public_key;  // clients: the head's public key
  std::set<std::string> authorized;  // server: client public keys ZAP admits

  bool enabled() const { return !own.public_key.empty(); }
};

// ZAP domain the head's socket enforces.
constexpr const char* zap_domain = "atoll";

// errc::invalid_config when this libzmq was built without CURVE.
status check_curve_available();

expected<curve_keypair> generate_keypair();

// Writes a new key folder. Refuses to overwrite existing keys (errc::invalid_config).
status write_key_folder(const std::string& dir);
// Adds a named client key (DIR/clients/NAME.key) and authorizes it; returns its path.
expected<std::string> add_client_key(const std::string& dir, const std::string& name);

// The server side (head.key + authorized_keys) and the client side (client.key + head.pub).
// `client_key_file` overrides DIR/client.key (a per-node key from add_client_key).
expected<link_security> load_server_security(const std::string& dir);
expected<link_security> load_client_security(const std::string& dir, const std::string& client_key_file = {});

// True for endpoints that never leave this machine (loopback TCP, ipc, inproc).
bool is_local_endpoint(const std::string& endpoint);

// Applies keys to a socket before it binds (server) or connects (client).
void apply_server_security(zmq::socket_t& sock, const link_security& sec);
void apply_client_security(zmq::socket_t& sock, const link_security& sec);

// Answers ZeroMQ's authentication requests (RFC 27) for one context: admits a CURVE
// client whose public key is authorized, in our domain; refuses everything else.
// Bind it before the server socket binds; call handle() when socket() is readable.
class zap_handler {
 public:
  zap_handler(zmq::context_t& ctx, std::set<std::string> authorized);
  zmq::socket_t& socket() { return sock_; }
  enum class verdict { none, admitted, denied };
  // Answers one pending request, if any. An admitted client's user id is its Z85 key.
  verdict handle();
  // Replaces the admitted keys (a node's data endpoint admits the current members).
  // Thread-safe; connections already admitted stay.
  void set_authorized(std::set<std::string> keys);

 private:
  zmq::socket_t sock_;
  std::mutex mu_;
  std::set<std::string> authorized_;  // guarded by mu_
};

}  // namespace atl
