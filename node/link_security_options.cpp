// --keys / --insecure of `atoll up` and `atoll join`.
#include <iostream>

#include "node/lifecycle.hpp"
#include "runtime/transport/head_endpoints.hpp"

namespace atl {
namespace {

// tcp://HOST:PORT (HOST may be * or [v6] when binding) or ipc://PATH.
status check_endpoint(const std::string& endpoint) {
  const auto bad = [&](const std::string& why) {
    return make_error(errc::invalid_config, "endpoint '" + endpoint + "': " + why + " (expected tcp://HOST:PORT)");
  };
  if (endpoint.rfind("ipc://", 0) == 0) return endpoint.size() > 6 ? status{} : bad("no path");
  if (endpoint.rfind("tcp://", 0) != 0) return bad("unknown transport");
  const auto colon = endpoint.rfind(':');
  if (colon <= 6) return bad("no port");
  const std::string port = endpoint.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos ||
      std::stoi(port) > 65535)
    return bad("port '" + port + "' is not a number from 0 to 65535");
  return {};
}

}  // namespace

expected<link_security> resolve_link_security(link_side side, const std::string& endpoint, const std::string& keys_dir,
                                              const std::string& client_key, bool insecure, const char* command) {
  // `atoll join --head A,B`: every head's endpoint, each checked; loopback only if all are.
  const auto endpoints = split_endpoints(endpoint);
  if (endpoints.empty()) return make_error(errc::invalid_config, "no endpoint given (expected tcp://HOST:PORT)");
  bool all_local = true;
  for (const auto& one : endpoints) {
    if (auto err = check_endpoint(one)) return err;
    all_local = all_local && is_local_endpoint(one);
  }
  if (!keys_dir.empty()) {
    if (insecure) return make_error(errc::invalid_config, "--keys and --insecure exclude each other");
    return side == link_side::server ? load_server_security(keys_dir) : load_client_security(keys_dir, client_key);
  }
  if (!client_key.empty()) return make_error(errc::invalid_config, "--client-key needs --keys DIR (for head.pub)");
  if (all_local) return link_security{};
  if (!insecure)
    return make_error(errc::invalid_config,
                      endpoint +
                          " is not a loopback address: pass --keys DIR (see `atoll keygen`), or --insecure to "
                          "send unauthenticated, unencrypted traffic");
  std::cerr << command << ": WARNING: --insecure: " << endpoint
            << " carries unauthenticated, unencrypted traffic; anyone who reaches it can join the cluster\n";
  return link_security{};
}

}  // namespace atl
