#include "head/head_http.hpp"

// Debian's cpp-httplib is a compiled library: its limits are its build's (a header line
// past 8 KiB is refused); the thread pool and timeouts are set here.
#include <httplib.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>
#include <tuple>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/registry/prometheus_text.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/http_listen.hpp"

#ifndef ATOLL_WEB_DIR
#define ATOLL_WEB_DIR "web"
#endif

namespace atl {
namespace {

using json = nlohmann::json;

constexpr std::size_t request_threads = 4;  // the endpoint's whole budget besides its listener

// A registry view, asked in process: ok and the JSON text.
std::pair<bool, std::string> ask_registry(caf::actor_system& sys, const caf::actor& registry,
                                          const std::string& command, const std::string& argument) {
  caf::scoped_actor self{sys};
  std::pair<bool, std::string> out{false, json{{"error", "the registry did not answer"}}.dump()};
  self->request(registry, std::chrono::seconds(3), view_atom::value, command, argument)
      .receive(
          [&](bool ok, const std::string& body) {
            out = {ok, body};
          },
          [&](const caf::error& e) {
            out.second = json{{"error", sys.render(e)}}.dump();
          });
  return out;
}

// The dashboard's files: a fixed list, so no path from a request reaches the disk.
const std::map<std::string, std::pair<std::string, const char*>>& static_files() {
  static const std::map<std::string, std::pair<std::string, const char*>> files = {
      {"/", {"index.html", "text/html; charset=utf-8"}},
      {"/app.js", {"app.js", "text/javascript; charset=utf-8"}},
      {"/style.css", {"style.css", "text/css; charset=utf-8"}},
      {"/vendor/uPlot.iife.min.js", {"vendor/uPlot.iife.min.js", "text/javascript; charset=utf-8"}},
      {"/vendor/uPlot.min.css", {"vendor/uPlot.min.css", "text/css; charset=utf-8"}},
  };
  return files;
}

bool read_whole(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream os;
  os << in.rdbuf();
  out = os.str();
  return true;
}

// GET /api/members?state=S&limit=N&offset=K as the registry's query text
// (actors/decisions/member_query.hpp), which checks it: a value with a comma in it makes a
// part the registry refuses.
std::string member_query_of(const httplib::Request& req) {
  std::string query;
  for (const char* key : {"state", "limit", "offset"})
    if (req.has_param(key)) query += (query.empty() ? "" : ",") + std::string(key) + "=" + req.get_param_value(key);
  return query;
}

void send_json(httplib::Response& res, const std::pair<bool, std::string>& answer) {
  res.status = answer.first ? 200 : 400;
  res.set_content(answer.second, "application/json");
}

}  // namespace

struct head_http::impl {
  caf::actor_system& sys;
  caf::actor registry;
  http_access access;
  std::string web_dir;
  httplib::Server server;
  std::thread listener;

  impl(caf::actor_system& s, caf::actor r, http_access a, std::string w)
      : sys(s), registry(std::move(r)), access(std::move(a)), web_dir(std::move(w)) {}

  std::pair<bool, std::string> view(const std::string& command, const std::string& argument = "") {
    return ask_registry(sys, registry, command, argument);
  }

  void routes() {
    server.new_task_queue = [] { return new httplib::ThreadPool(request_threads); };
    server.set_read_timeout(2, 0);  // a slow client is dropped, not waited for
    server.set_write_timeout(5, 0);
    server.set_keep_alive_max_count(100);
    server.set_keep_alive_timeout(5);
    server.set_payload_max_length(4096);
    server.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      const bool action = req.method != "GET" && req.method != "HEAD";
      // The probes say only "alive" and "leading", to a kubelet that holds no token.
      if (!action && (req.path == "/livez" || req.path == "/readyz"))
        return httplib::Server::HandlerResponse::Unhandled;
      if (decide_http(access, action, req.get_header_value("Authorization")) == http_verdict::allow)
        return httplib::Server::HandlerResponse::Unhandled;
      res.status = 401;
      res.set_header("WWW-Authenticate", "Bearer");
      res.set_content(json{{"error", action ? "this action needs the bearer token (KEYS/http.token)"
                                            : "this endpoint is not on loopback: it needs the bearer token "
                                              "(KEYS/http.token)"}}
                          .dump(),
                      "application/json");
      return httplib::Server::HandlerResponse::Handled;
    });
    // Probes (deploy/kubernetes): live while the registry actor in this process answers (nothing
    // outside it is asked; "ping" builds no view, so a kubelet's probes cost the head nothing at
    // ten thousand nodes); ready while this head leads, which a head serving here does (a
    // standby serves standby_http instead).
    for (const char* probe : {"/livez", "/readyz"})
      server.Get(probe, [this](const httplib::Request&, httplib::Response& res) {
        const bool answers = view("ping").first;
        res.status = answers ? 200 : 503;
        res.set_content(json{{"live", answers}, {"ready", answers}, {"leading", true}}.dump(), "application/json");
      });
    // Summaries by default; ?per_node=1 adds a series for each node and worker.
    server.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
      const auto status = view("status"), members = view("members");
      if (!status.first || !members.first) return send_json(res, {false, status.second});
      const auto detail = req.get_param_value("per_node") == "1" ? metrics_detail::per_node : metrics_detail::summary;
      res.set_content(prometheus_text(json::parse(status.second), json::parse(members.second), detail),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    for (const char* command : {"status", "members", "fragments", "explain", "checkpoints", "data"})
      server.Get(std::string("/api/") + command, [this, command](const httplib::Request& req, httplib::Response& res) {
        send_json(res, view(command, std::string(command) == "members" ? member_query_of(req)
                                                                       : req.get_param_value("fragment")));
      });
    // The page's one request per second: everything it shows, summarized, and one page of
    // members (?state=&limit=&offset=, as /api/members).
    server.Get("/api/dashboard", [this](const httplib::Request& req, httplib::Response& res) {
      send_json(res, view("dashboard", member_query_of(req)));
    });
    server.Post("/api/drain", [this](const httplib::Request& req, httplib::Response& res) {
      const auto node = req.get_param_value("node");
      log_info("http: drain node " + node + " requested by " + req.remote_addr);
      send_json(res, view("leave", node));
    });
    for (const auto& [path, file] : static_files()) {
      server.Get(path, [this, file = file](const httplib::Request&, httplib::Response& res) {
        std::string body;
        if (!read_whole(web_dir + "/" + file.first, body)) {
          res.status = 404;
          res.set_content(file.first + " is not built (web/ assets: see README, Dashboard)", "text/plain");
          return;
        }
        res.set_content(body, file.second);
      });
    }
    server.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      res.set_content(json{{"error", std::to_string(res.status) + " for " + req.method + " " + req.path}}.dump(),
                      "application/json");
    });
  }
};

head_http::head_http(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

head_http::~head_http() {
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

expected<std::unique_ptr<head_http>> head_http::start(caf::actor_system& sys, caf::actor registry,
                                                      const std::string& endpoint, http_access access,
                                                      std::string web_dir) {
  auto where = parse_http_endpoint(endpoint);
  if (!where) return where.err();
  const auto& [host, port] = *where;
  access.loopback = is_loopback_host(host);
  auto p = std::make_unique<impl>(sys, std::move(registry), std::move(access), std::move(web_dir));
  p->routes();
  auto url = bind_and_listen(p->server, p->listener, host, port, "--http");
  if (!url) return url.err();
  std::unique_ptr<head_http> out(new head_http(std::move(p)));
  out->url_ = *url;
  return out;
}

struct standby_http::impl {
  std::function<std::string()> leader_url;
  httplib::Server server;
  std::thread listener;
};

standby_http::standby_http(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

standby_http::~standby_http() {
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

expected<std::unique_ptr<standby_http>> standby_http::start(const std::string& endpoint,
                                                            std::function<std::string()> leader_url) {
  auto where = parse_http_endpoint(endpoint);
  if (!where) return where.err();
  auto p = std::make_unique<impl>();
  p->leader_url = std::move(leader_url);
  auto& server = p->server;
  server.new_task_queue = [] { return new httplib::ThreadPool(1); };  // redirects only
  server.set_read_timeout(2, 0);
  server.set_write_timeout(2, 0);
  server.set_payload_max_length(4096);
  // A standby is alive and not ready: the Service routes to the leader alone.
  server.Get("/livez", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(json{{"live", true}, {"ready", false}, {"leading", false}}.dump(), "application/json");
  });
  server.Get("/readyz", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(json{{"live", true}, {"ready", false}, {"leading", false}}.dump(), "application/json");
  });
  server.Get(".*", [raw = p.get()](const httplib::Request& req, httplib::Response& res) {
    // The path is decoded (%0D%0A is a line break): a control character would split the header.
    for (const char c : req.path)
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
        res.status = 400;
        res.set_content(json{{"error", "a control character in the path"}}.dump(), "application/json");
        return;
      }
    const auto leader = raw->leader_url();
    if (leader.empty()) {
      res.status = 503;
      res.set_content(json{{"error", "this head stands by and no head leads now"}}.dump(), "application/json");
      return;
    }
    // The path only (never the query's token): the leader's own page asks for what it needs.
    res.set_redirect(leader + (req.path.empty() ? "" : req.path.substr(1)), 307);
  });
  auto url = bind_and_listen(p->server, p->listener, where->first, where->second, "--http");
  if (!url) return url.err();
  std::unique_ptr<standby_http> out(new standby_http(std::move(p)));
  out->url_ = *url;
  return out;
}

bool head_http::loopback() const { return impl_->access.loopback; }

std::string default_web_dir() {
  const char* env = std::getenv("ATOLL_WEB_DIR");
  return env && *env ? env : ATOLL_WEB_DIR;
}

}  // namespace atl
