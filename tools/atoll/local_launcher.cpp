// `atoll local`: a head and N node processes on this machine, on loopback, training one
// run to completion with live progress. Children run in their own process groups (so a
// Ctrl-C reaches only the launcher, which then stops them cleanly) and log to
// RUN_DIR/logs/. The launcher watches them through the head's control protocol.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "runtime/process/config.hpp"
#include "runtime/transport/control_client.hpp"
#include "tools/atoll/processes.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

constexpr auto head_start_timeout = std::chrono::seconds(30);
constexpr auto status_timeout = std::chrono::milliseconds(3000);
constexpr auto unreachable_limit = std::chrono::seconds(60);

struct child {
  std::string name;
  pid_t pid = -1;
  std::string log;
  int status = -1;  // exit code once reaped
};

std::string self_exe() {
  std::error_code ec;
  auto p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? "atoll" : p.string();
}

child spawn_child(const std::string& name, const std::vector<std::string>& args, const std::string& log) {
  child c{name, -1, log};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      ::close(fd);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    std::perror("execv");
    ::_exit(127);
  }
  c.pid = pid;
  return c;
}

// Reaps children that exited; returns false if one failed.
bool reap(std::vector<child>& children, std::string& failure) {
  bool ok = true;
  for (auto& c : children) {
    if (c.status >= 0 || c.pid <= 0) continue;
    int st = 0;
    if (::waitpid(c.pid, &st, WNOHANG) != c.pid) continue;
    c.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (c.status != 0) {
      ok = false;
      failure = c.name + " exited with status " + std::to_string(c.status) + " (log: " + c.log + ")";
    }
  }
  return ok;
}

void stop_children(std::vector<child>& children, const std::string& head, const link_security& security) {
  if (!head.empty()) (void)control_request(head, "down", "", std::chrono::milliseconds(2000), security);
  const auto deadline = clock_type::now() + std::chrono::seconds(15);
  std::string ignored;
  while (clock_type::now() < deadline) {
    reap(children, ignored);
    bool all = true;
    for (const auto& c : children) all = all && c.status >= 0;
    if (all) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  for (auto& c : children)
    if (c.status < 0) {
      ::kill(-c.pid, SIGKILL);
      ::waitpid(c.pid, nullptr, 0);
      c.status = 137;
    }
}

std::string tail_of(const std::string& path, std::size_t lines) {
  std::ifstream in(path);
  std::vector<std::string> all;
  for (std::string l; std::getline(in, l);) all.push_back(l);
  std::ostringstream os;
  for (std::size_t i = all.size() > lines ? all.size() - lines : 0; i < all.size(); ++i) os << "    " << all[i] << "\n";
  return os.str();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int u = 0;
  while (b >= 1000 && u < 4) {
    b /= 1000;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

// The `count` payload kinds that carried the most bytes (in + out) on the head's link, largest
// first: "round_report 120.3 kB, heartbeat 80.1 kB, ...".
std::string largest_kinds(const json& by_kind, std::size_t count) {
  std::vector<std::pair<double, std::string>> kinds;
  for (const auto& [kind, bytes] : by_kind.items())
    kinds.emplace_back(bytes.value("in", 0.0) + bytes.value("out", 0.0), kind);
  std::sort(kinds.begin(), kinds.end(), std::greater<>());
  std::string out;
  for (std::size_t i = 0; i < kinds.size() && i < count; ++i)
    out += (i ? ", " : "") + kinds[i].second + " " + human_bytes(kinds[i].first);
  return out;
}

// Rounds committed by each fragment, and its slices: with diloco.shards each slice is a unit
// of its own (entries with "fragment" and "slice"), and a fragment is at round r when all
// its slices are.
struct fragment_progress {
  std::uint64_t round = UINT64_MAX;
  std::size_t slices = 0;
};
std::map<std::uint64_t, fragment_progress> fragment_rounds(const json& units) {
  std::map<std::uint64_t, fragment_progress> out;
  for (const auto& u : units) {
    auto& f = out[u.value("fragment", u["id"].get<std::uint64_t>())];
    f.round = std::min(f.round, u["round"].get<std::uint64_t>());
    ++f.slices;
  }
  return out;
}

std::string progress_line(const json& s) {
  std::uint64_t min_step = UINT64_MAX, rounds = 0;
  double loss = 0, tps = 0, sent = 0;
  std::size_t n = 0;
  for (const auto& w : s["workers"]) {
    min_step = std::min<std::uint64_t>(min_step, w["step"].get<std::uint64_t>());
    loss += w["loss"].get<double>();
    if (!w["done"].get<bool>()) tps += w["tokens_per_s"].get<double>();
    sent += w["bytes_sent"].get<double>();
    ++n;
  }
  for (const auto& [id, f] : fragment_rounds(s["fragments"])) rounds += f.round;
  std::ostringstream os;
  os.precision(3);
  if (n == 0) {
    os << "waiting for workers (" << s["state"].get<std::string>() << ")";
    return os.str();
  }
  os << "step " << min_step << "/" << s["steps"].get<std::int64_t>() << " | loss " << loss / n << " | "
     << static_cast<long>(tps) << " tok/s | rounds " << rounds << " | sent " << human_bytes(sent / n) << "/worker";
  const auto& ev = s["last_eval"];
  if (ev["step"].get<std::int64_t>() >= 0)
    os << " | val " << ev["val_loss"].get<double>() << " @" << ev["step"].get<std::int64_t>();
  return os.str();
}

void print_summary(const json& s, double wall, const std::string& run_dir, const std::string& metrics) {
  std::cout << "\nrun finished in " << std::fixed;
  std::cout.precision(1);
  std::cout << wall << " s\n";
  std::cout.precision(3);
  const auto& ev = s["last_eval"];
  std::cout << "  held-out loss of the global model: " << ev["val_loss"].get<double>() << " at step "
            << ev["step"].get<std::int64_t>() << "\n";
  for (const auto& w : s["workers"]) {
    std::cout.precision(0);
    std::cout << "  " << w["id"].get<std::string>() << ": " << w["step"].get<std::uint64_t>() << " steps, "
              << w["tokens_per_s"].get<double>() << " tokens/s, sent " << human_bytes(w["bytes_sent"].get<double>())
              << ", received " << human_bytes(w["bytes_received"].get<double>()) << "\n";
  }
  for (const auto& [id, f] : fragment_rounds(s["fragments"]))
    std::cout << "  fragment " << id << ": " << f.round << " rounds committed"
              << (f.slices > 1 ? " (in " + std::to_string(f.slices) + " slices)" : std::string()) << "\n";
  if (const auto& link = s.value("head_link", json::object()); link.contains("bytes_relayed")) {
    const double in = link["bytes_in"].get<double>(), out = link["bytes_out"].get<double>();
    const double relayed = link["bytes_relayed"].get<double>();
    const double tensors = link.value("tensor_bytes_in", 0.0) + link.value("tensor_bytes_out", 0.0);
    std::cout << "  head link: " << human_bytes(in + relayed + out) << " (tensors to and from the head's keeper "
              << human_bytes(tensors) << "; relayed between nodes " << human_bytes(relayed) << ", of which tensors "
              << human_bytes(link["tensor_bytes_relayed"].get<double>()) << ")\n";
    if (const auto& kinds = link.value("by_kind", json::object()); !kinds.empty())
      std::cout << "  head link by kind: " << largest_kinds(kinds, 5) << "\n";
  }
  std::cout << "  run dir: " << run_dir << "\n  metrics: " << metrics << "\n";
}

}  // namespace

int run_local(const local_options& opt) {
  warn_if_reference_blas();
  if (opt.nodes < 1 || opt.workers_per_node < 1) {
    std::cerr << "atoll local: --nodes and --workers-per-node must be at least 1\n";
    return 2;
  }
  // Build and check the run's config here, so a bad value fails before any process starts.
  run_config cfg;
  if (!opt.config_file.empty()) {
    auto loaded = load_config_file(opt.config_file);
    if (!loaded) {
      std::cerr << "atoll local: " << loaded.err().describe() << "\n";
      return 2;
    }
    cfg = *loaded;
  }
  std::vector<std::string> overrides = opt.overrides;
  if (!opt.example.empty()) overrides.push_back("run.example=" + opt.example);
  if (opt.steps > 0) overrides.push_back("run.steps=" + std::to_string(opt.steps));
  if (!opt.model_file.empty()) overrides.push_back("run.example=torchscript");
  overrides.push_back("run.min_workers=" + std::to_string(opt.nodes * opt.workers_per_node));
  for (const auto& o : overrides)
    if (auto err = apply_override(cfg, o)) {
      std::cerr << "atoll local: " << err.describe() << "\n";
      return 2;
    }

  // The data and the model as every worker will open them: a bad file is refused now,
  // with its name and the problem, not in a node's log after the cluster started.
  if (auto err = check_task(cfg, opt.model_file, static_cast<std::uint32_t>(opt.nodes * opt.workers_per_node),
                            /*with_data=*/true)) {
    std::cerr << "atoll local: " << err.describe() << "\n";
    return 2;
  }

  std::string run_dir = opt.run_dir;
  if (run_dir.empty()) {
    char stamp[32];
    const std::time_t now = std::time(nullptr);
    std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::localtime(&now));
    run_dir = "atoll-runs/local-" + std::string(stamp);
  }
  std::error_code ec;
  fs::create_directories(run_dir + "/logs", ec);
  if (ec) {
    std::cerr << "atoll local: cannot create " << run_dir << ": " << ec.message() << "\n";
    return 2;
  }
  const std::string config_path = run_dir + "/config.toml";
  std::ofstream(config_path) << to_toml(cfg);
  const std::string metrics = opt.metrics_file.empty() ? run_dir + "/metrics.jsonl" : opt.metrics_file;
  const int total_workers = opt.nodes * opt.workers_per_node;
  const int threads = cfg.threads_per_worker > 0
                          ? static_cast<int>(cfg.threads_per_worker)
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / total_workers);

  std::cout << "atoll local: " << opt.nodes << " node(s) x " << opt.workers_per_node << " worker(s), example "
            << cfg.example << ", " << cfg.steps << " steps, H=" << cfg.sync_every << ", run dir " << run_dir
            << std::endl;
  // Throw-away CURVE keys for this run (kept when a run dir is reused); atollctl
  // --run-dir finds them in RUN_DIR/keys. With --plain-links there are none, and a run
  // dir that has them is refused: atollctl would speak CURVE to a plain head.
  const std::string keys = run_dir + "/keys";
  if (opt.plain_links && fs::exists(keys + "/head.key")) {
    std::cerr << "atoll local: " << keys << " holds this run dir's CURVE keys; --plain-links needs another run dir\n";
    return 2;
  }
  if (!opt.plain_links && !fs::exists(keys + "/head.key")) {
    if (auto err = write_key_folder(keys)) {
      std::cerr << "atoll local: " << err.describe() << "\n";
      return 2;
    }
  }
  link_security client_keys;
  if (!opt.plain_links) {
    auto loaded_keys = load_client_security(keys);
    if (!loaded_keys) {
      std::cerr << "atoll local: " << loaded_keys.err().describe() << "\n";
      return 2;
    }
    client_keys = *loaded_keys;
  }
  const std::vector<std::string> key_args =
      opt.plain_links ? std::vector<std::string>{} : std::vector<std::string>{"--keys", keys};
  const std::string exe = self_exe();
  std::vector<child> children;
  fs::remove(run_dir + "/head/head.endpoint", ec);
  fs::remove(run_dir + "/head/http.endpoint", ec);
  std::vector<std::string> head_args = {exe,         "up",
                                        "--listen",  "tcp://127.0.0.1:0",
                                        "--run-dir", run_dir + "/head",
                                        "--config",  config_path,
                                        "--metrics", metrics,
                                        "--http",    opt.http};
  head_args.insert(head_args.end(), key_args.begin(), key_args.end());
  // The nodes receive the model from the head, as they would on separate machines.
  if (!opt.model_file.empty()) head_args.insert(head_args.end(), {"--model", opt.model_file});
  children.push_back(spawn_child("head", head_args, run_dir + "/logs/head.log"));
  const auto& stop = install_stop_signals();
  std::string head, failure;
  const auto wait_until = clock_type::now() + head_start_timeout;
  while (head.empty()) {
    std::ifstream in(run_dir + "/head/head.endpoint");
    std::getline(in, head);
    if (!head.empty()) break;
    if (!reap(children, failure) || clock_type::now() > wait_until || stop) {
      std::cerr << "atoll local: the head did not start: " << (failure.empty() ? "timeout" : failure) << "\n"
                << tail_of(children[0].log, 20);
      stop_children(children, "", {});
      return 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (int n = 0; n < opt.nodes; ++n) {
    std::string devices = opt.devices.empty() ? "cpu" : opt.devices;
    for (int k = 1; opt.devices.empty() && k < opt.workers_per_node; ++k) devices += ",cpu";
    const std::string name = "node" + std::to_string(n + 1);
    std::vector<std::string> args = {exe,         "join",
                                     "--head",    head,
                                     "--run-dir", run_dir + "/" + name,
                                     "--devices", devices,
                                     "--threads", std::to_string(std::max(1, threads * opt.workers_per_node))};
    args.insert(args.end(), key_args.begin(), key_args.end());
    if (n >= opt.nodes - opt.relayed_nodes) args.push_back("--no-listen");
    children.push_back(spawn_child(name, args, run_dir + "/logs/" + name + ".log"));
  }

  {
    std::string url;
    for (int i = 0; i < 50 && url.empty(); ++i) {  // written by the head right after its endpoint
      std::ifstream in(run_dir + "/head/http.endpoint");
      std::getline(in, url);
      if (url.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (!url.empty())
      std::cout << "dashboard: " << url << "  (Prometheus: " << url << "metrics; "
                << (opt.plain_links ? "read-only: no keys, no drain token" : "drain token in " + keys + "/http.token")
                << ")" << std::endl;
  }
  const bool tty = ::isatty(1);
  const auto started = clock_type::now();
  auto last_answer = clock_type::now();
  auto last_print = clock_type::now() - std::chrono::seconds(60);
  json status;
  int code = 0;
  while (true) {
    if (stop) {
      std::cout << "\natoll local: interrupted; stopping the cluster" << std::endl;
      code = 130;
      break;
    }
    if (!reap(children, failure)) {
      std::cerr << "\natoll local: " << failure << "\n";
      for (const auto& c : children)
        if (c.status > 0) std::cerr << "  last lines of " << c.log << ":\n" << tail_of(c.log, 15);
      code = 1;
      break;
    }
    auto reply = control_request(head, "status", "", status_timeout, client_keys);
    if (reply && reply->ok) {
      last_answer = clock_type::now();
      status = json::parse(reply->json, nullptr, false);
      if (status.is_discarded()) status = json::object();
      const std::string line = progress_line(status);
      if (tty) {
        std::cout << "\r\033[K" << line << std::flush;
      } else if (clock_type::now() - last_print > std::chrono::seconds(10)) {
        std::cout << line << std::endl;
        last_print = clock_type::now();
      }
      if (status.value("state", "") == "finished") break;
    } else if (clock_type::now() - last_answer > unreachable_limit) {
      std::cerr << "\natoll local: the head has not answered for " << unreachable_limit.count() << " s\n";
      code = 1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  }
  const double wall = std::chrono::duration<double>(clock_type::now() - started).count();
  if (code == 0) print_summary(status, wall, run_dir, metrics);
  stop_children(children, head, client_keys);
  return code;
}

}  // namespace atl
