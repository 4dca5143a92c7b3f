#include "node/health_http.hpp"

#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/transport/http_listen.hpp"

namespace atl {

struct health_http::impl {
  std::shared_ptr<const process_health> health;
  std::chrono::steady_clock::duration grace;
  httplib::Server server;
  std::thread listener;
};

health_http::health_http(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

health_http::~health_http() {
  impl_->server.stop();
  if (impl_->listener.joinable()) impl_->listener.join();
}

expected<std::unique_ptr<health_http>> health_http::start(const std::string& endpoint,
                                                          std::shared_ptr<const process_health> health,
                                                          std::chrono::steady_clock::duration grace) {
  auto where = parse_http_endpoint(endpoint, "--health");
  if (!where) return where.err();
  auto p = std::make_unique<impl>();
  p->health = std::move(health);
  p->grace = grace;
  auto& server = p->server;
  server.new_task_queue = [] { return new httplib::ThreadPool(1); };  // a probe at a time
  server.set_read_timeout(2, 0);
  server.set_write_timeout(2, 0);
  server.set_payload_max_length(1024);
  const auto answer = [raw = p.get()](bool ready_probe, httplib::Response& res) {
    const health_report r = raw->health->read(std::chrono::steady_clock::now(), raw->grace);
    res.status = (ready_probe ? r.ready : r.live) ? 200 : 503;
    res.set_content(
        nlohmann::json{{"live", r.live}, {"ready", r.ready}, {"epoch", r.epoch}, {"since_beat_s", r.since_beat_s}}
            .dump(),
        "application/json");
  };
  server.Get("/livez", [answer](const httplib::Request&, httplib::Response& res) { answer(false, res); });
  server.Get("/readyz", [answer](const httplib::Request&, httplib::Response& res) { answer(true, res); });
  auto url = bind_and_listen(server, p->listener, where->first, where->second, "--health");
  if (!url) return url.err();
  return std::unique_ptr<health_http>(new health_http(std::move(p)));
}

}  // namespace atl
