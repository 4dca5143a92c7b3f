#pragma once
// The head's HTTP endpoint (`atoll up --http tcp://HOST:PORT`): Prometheus metrics at
// /metrics, the dashboard at / (web/: its page, script and the npm chart library), the
// registry's views as JSON under /api/, one action, POST /api/drain?node=N (as
// `atoll leave`), and the probes GET /livez and /readyz (no token: they say only "alive",
// "leading"). Every answer is a registry view, asked of the registry actor in process
// (the same control commands atollctl sends), so no page disagrees with atollctl.
//
// Its own thread budget (four request threads plus the listener), short read and write
// timeouts, small header and body limits: a bad or slow client costs it, not training.
// Access: head/http_access.hpp.
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "head/http_access.hpp"
#include "runtime/core/expected.hpp"

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

// A head standing by (head/head_failover.cpp) on the --http it will serve once it
// leads: every GET is redirected (307) to the same path at the leading head's HTTP
// endpoint, so a dashboard opened on any head shows the leader's; 503 while no head leads.
// Its /livez answers 200 and its /readyz 503: a standby is alive, and not the one to route to.
class standby_http {
 public:
  // `leader_url()`: the leading head's "http://HOST:PORT/", empty when unknown; called per request.
  static expected<std::unique_ptr<standby_http>> start(const std::string& endpoint,
                                                       std::function<std::string()> leader_url);
  ~standby_http();
  standby_http(const standby_http&) = delete;
  standby_http& operator=(const standby_http&) = delete;
  const std::string& url() const { return url_; }

 private:
  struct impl;
  explicit standby_http(std::unique_ptr<impl> p);
  std::unique_ptr<impl> impl_;
  std::string url_;
};

}  // namespace atl
