// --keys / --insecure of `atoll up` and `atoll join`.
#include <iostream>

#include "tools/atoll/processes.hpp"

namespace atl {

expected<link_security> resolve_link_security(link_side side, const std::string& endpoint, const std::string& keys_dir,
                                              const std::string& client_key, bool insecure, const char* command) {
  if (!keys_dir.empty()) {
    if (insecure) return make_error(errc::invalid_config, "--keys and --insecure exclude each other");
    return side == link_side::server ? load_server_security(keys_dir) : load_client_security(keys_dir, client_key);
  }
  if (!client_key.empty()) return make_error(errc::invalid_config, "--client-key needs --keys DIR (for head.pub)");
  if (is_local_endpoint(endpoint)) return link_security{};
  if (!insecure)
    return make_error(errc::invalid_config,
                      endpoint + " is not a loopback address: pass --keys DIR (see `atoll keygen`), or --insecure to "
                                 "send unauthenticated, unencrypted traffic");
  std::cerr << command << ": WARNING: --insecure: " << endpoint
            << " carries unauthenticated, unencrypted traffic; anyone who reaches it can join the cluster\n";
  return link_security{};
}

}  // namespace atl
