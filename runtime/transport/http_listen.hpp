#pragma once
// The HTTP endpoints a process serves (the head's --http: head/head_http.hpp; a node's
// --health: node/health_http.hpp): "tcp://HOST:PORT" parsed, and a server bound there.
#include <string>
#include <thread>
#include <utility>

#include <httplib.h>

#include "runtime/core/expected.hpp"

namespace atl {

// "tcp://HOST:PORT" as host ([v6] unbracketed) and port; invalid_config naming `flag` if not that.
expected<std::pair<std::string, int>> parse_http_endpoint(const std::string& endpoint,
                                                          const std::string& flag = "--http");

// Binds HOST:PORT (0 picks one) and serves on `listener`; the URL it serves at
// ("http://HOST:PORT/"), or invalid_config naming `flag` if it cannot listen there.
expected<std::string> bind_and_listen(httplib::Server& server, std::thread& listener, const std::string& host, int port,
                                      const std::string& flag);

}  // namespace atl
