#pragma once
// The head's HTTP endpoint (`atoll up --http tcp://HOST:PORT`): Prometheus metrics at
// /metrics, the dashboard at / (web/: its page, script and the npm chart library), the
// registry's views as JSON under /api/, and one action, POST /api/drain?node=N (as
// `atoll leave`). Every answer is a registry view, asked of the registry actor in process
// (the same control commands atollctl sends), so no page disagrees with atollctl.
//
// Its own thread budget (four request threads plus the listener), short read and write
// timeouts, small header and body limits: a bad or slow client costs it, not training.
// Access: runtime/http_access.hpp.
#include <memory>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "runtime/expected.hpp"
#include "runtime/http_access.hpp"

namespace atl {

class head_http {
 public:
  // Binds `endpoint` ("tcp://HOST:PORT", port 0 picks one) and serves on its own threads.
  // `web_dir`: the dashboard's files (built by CMake into BUILD/web).
  static expected<std::unique_ptr<head_http>> start(caf::actor_system& sys, caf::actor registry,
                                                    const std::string& endpoint, http_access access,
                                                    std::string web_dir);
  ~head_http();
  head_http(const head_http&) = delete;
  head_http& operator=(const head_http&) = delete;

  // "http://HOST:PORT/"
  const std::string& url() const { return url_; }
  // Bound to a loopback address (reads then need no token).
  bool loopback() const;

 private:
  struct impl;
  explicit head_http(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
  std::string url_;
};

// Where the dashboard's files are: $ATOLL_WEB_DIR, else the build tree's web/.
std::string default_web_dir();

}  // namespace atl
