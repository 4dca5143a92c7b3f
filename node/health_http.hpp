#pragma once
// A node's probes over HTTP (`atoll join --health tcp://HOST:PORT`), for Kubernetes' httpGet
// probes (deploy/kubernetes): GET /livez answers 200 while the process's own actor system
// turns, GET /readyz 200 while the node is a member of the run in its current epoch
// (runtime/process/health.hpp); 503 otherwise, with the report as JSON either way. Nothing
// else is served (404), nothing is written, no token: the answers say only that.
// Its own thread; short timeouts and tiny limits, so a bad client costs it, not training.
#include <chrono>
#include <memory>
#include <string>

#include "runtime/core/expected.hpp"
#include "runtime/process/health.hpp"

namespace atl {

class health_http {
 public:
  // Binds `endpoint` ("tcp://HOST:PORT"; port 0 picks one). `grace`: how long without a beat
  // the process is still live.
  static expected<std::unique_ptr<health_http>> start(const std::string& endpoint,
                                                      std::shared_ptr<const process_health> health,
                                                      std::chrono::steady_clock::duration grace);
  ~health_http();
  health_http(const health_http&) = delete;
  health_http& operator=(const health_http&) = delete;

 private:
  struct impl;
  explicit health_http(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
};

}  // namespace atl
