#include "runtime/transport/http_listen.hpp"

#include <cstdlib>

namespace atl {

expected<std::pair<std::string, int>> parse_http_endpoint(const std::string& endpoint, const std::string& flag) {
  const std::string scheme = "tcp://";
  const auto colon = endpoint.rfind(':');
  if (endpoint.compare(0, scheme.size(), scheme) != 0 || colon == std::string::npos || colon < scheme.size())
    return make_error(errc::invalid_config, flag + " " + endpoint + ": not tcp://HOST:PORT");
  std::string host = endpoint.substr(scheme.size(), colon - scheme.size());
  char* end = nullptr;
  const long port = std::strtol(endpoint.c_str() + colon + 1, &end, 10);
  if (*end != '\0' || port < 0 || port > 65535)
    return make_error(errc::invalid_config, flag + " " + endpoint + ": not a port");
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::make_pair(host, static_cast<int>(port));
}

expected<std::string> bind_and_listen(httplib::Server& server, std::thread& listener, const std::string& host, int port,
                                      const std::string& flag) {
  const int bound = port == 0 ? server.bind_to_any_port(host) : (server.bind_to_port(host, port) ? port : -1);
  if (bound <= 0)
    return make_error(errc::invalid_config,
                      flag + " tcp://" + host + ":" + std::to_string(port) + ": cannot listen there");
  listener = std::thread([&server] { server.listen_after_bind(); });
  const bool v6 = host.find(':') != std::string::npos;
  return "http://" + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(bound) + "/";
}

}  // namespace atl
