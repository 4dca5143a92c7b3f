// atoll_sim_nodes: N simulated nodes in one process against a real head, for `./tools/dev
// bench scale` (tools/bench/scale.py). Each node is the real node agent and worker over its
// own connection to the head (sim_node.hpp); only the model is a stand-in. With churn
// rates, nodes are killed (connection closed), silenced (heartbeats stop), asked to leave,
// and new ones join, at random among the members, from a seeded generator; the churn starts
// after --churn-after seconds, or at SIGUSR1, and stops at SIGUSR2.
//
// Prints one JSON object a line on stdout:
//   {"event":"joined","node":N,"s":S}      S: its start -> the first PeerTable naming it
//   {"event":"kill"|"silence"|"leave","node":N,"s":S}
//                                           S: the fault -> the first PeerTable without it
//                                           that another node here received
//   {"event":"status","members":M,"pending":P,"t":T}   every second
//   {"event":"agreement","holders":H,"distinct_tables":D,"epoch":E,"listed":L}   at the end:
//                                           the healthy members, how many distinct tables
//                                           they hold (1: they agree), the newest epoch and
//                                           how many nodes its table lists
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <zmq.hpp>

#include "node/lifecycle.hpp"
#include "runtime/process/log.hpp"
#include "tools/sim_nodes/membership_watch.hpp"
#include "tools/sim_nodes/sim_node.hpp"

namespace {

volatile std::sig_atomic_t stop_requested = 0;
volatile std::sig_atomic_t churn_requested = 0;  // SIGUSR1: start the churn now
volatile std::sig_atomic_t churn_stopped = 0;  // SIGUSR2: no more churn

struct churn_rates {  // events a second, each at random among the healthy members
  double kills = 0, silences = 0, leaves = 0, joins = 0;
  bool any() const { return kills > 0 || silences > 0 || leaves > 0 || joins > 0; }
};

struct options {
  std::string head, keys_dir;
  bool insecure = false;
  std::size_t nodes = 10;
  std::size_t values = 1024;
  int step_ms = 200;
  int start_interval_ms = 2;
  double seconds = 60;
  double churn_after_s = 10;
  double churn_for_s = 0;  // 0: until the end (or SIGUSR2)
  churn_rates churn;
  std::uint64_t seed = 1;
};

class simulation {
 public:
  simulation(caf::actor_system& sys, const options& opt, atl::link_security security)
      : sys_(sys), opt_(opt), security_(std::move(security)), rng_(opt.seed) {
    // About five sockets a node (the link, its monitor's pair, the inproc queue's two ends).
    context_.set(zmq::ctxopt::max_sockets, static_cast<int>(std::min<std::size_t>(8 * (opt.nodes + 64), 1 << 20)));
  }

  ~simulation() {
    // Closed first, all of them, so that none waits on another's Goodbye.
    for (auto& n : nodes_)
      if (n) n->close();
    nodes_.clear();
  }

  void start_node() {
    const std::size_t index = nodes_.size();
    atl::sim::sim_node_settings s;
    s.links.head = opt_.head;
    s.links.security = security_;
    s.links.context = &context_;
    s.hostname = "sim-" + std::to_string(::getpid()) + "-" + std::to_string(index);
    s.values = opt_.values;
    s.step_time = std::chrono::milliseconds(opt_.step_ms);
    s.on_table = [this, index](const atl::routes_update& update) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& e :
           watch_.table_seen(index, update.self_node, update.table, update.digest, atl::sim::clock::now()))
        say(e);
    };
    {
      std::lock_guard<std::mutex> lock(mu_);
      watch_.started(index, atl::sim::clock::now());
    }
    nodes_.push_back(std::make_unique<atl::sim::sim_node>(sys_, s));
  }

  // One fault of `what` on a random healthy member; false when there is none.
  bool fault(const std::string& what) {
    std::size_t index = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const auto healthy = watch_.healthy_members();
      if (healthy.empty()) return false;
      index = healthy[std::uniform_int_distribution<std::size_t>(0, healthy.size() - 1)(rng_)];
      watch_.fault(index, what, atl::sim::clock::now());
    }
    auto& node = *nodes_[index];
    if (what == "kill") node.close();
    else if (what == "silence") node.silence();
    else node.leave();
    return true;
  }

  // The last line: whether the healthy members hold one table (after a quiet spell).
  void report_agreement() {
    std::lock_guard<std::mutex> lock(mu_);
    const auto a = watch_.tables_held();
    std::cout << "{\"event\":\"agreement\",\"holders\":" << a.holders << ",\"distinct_tables\":" << a.distinct
              << ",\"epoch\":" << a.epoch << ",\"listed\":" << a.listed << "}\n"
              << std::flush;
  }

  void report_status(double t) {
    std::lock_guard<std::mutex> lock(mu_);
    std::cout << "{\"event\":\"status\",\"members\":" << watch_.members() << ",\"pending\":" << watch_.faults_pending()
              << ",\"started\":" << nodes_.size() << ",\"t\":" << t << "}\n"
              << std::flush;
  }

 private:
  void say(const atl::sim::watch_event& e) {  // under mu_
    std::cout << "{\"event\":\"" << e.what << "\",\"node\":" << e.node << ",\"s\":" << e.seconds << "}\n" << std::flush;
  }

  caf::actor_system& sys_;
  const options& opt_;
  // One ZeroMQ context (two I/O threads) for every node's links: a thread or two per node
  // would cost this process more than the nodes' own work. Declared before the nodes, so
  // it outlives their links.
  zmq::context_t context_{2};
  atl::link_security security_;
  std::mt19937_64 rng_;
  std::mutex mu_;
  atl::sim::membership_watch watch_;
  std::vector<std::unique_ptr<atl::sim::sim_node>> nodes_;
};

int run(const options& opt) {
  auto security =
      atl::resolve_link_security(atl::link_side::client, opt.head, opt.keys_dir, "", opt.insecure, "atoll_sim_nodes");
  if (!security) {
    std::cerr << "atoll_sim_nodes: " << security.err().describe() << "\n";
    return 2;
  }
  caf::actor_system_config cfg;
  atl::configure_actor_system(cfg);
  caf::actor_system sys{cfg};
  simulation sim(sys, opt, *security);
  const auto started = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  };
  try {
    for (std::size_t i = 0; i < opt.nodes && !stop_requested; ++i) {
      sim.start_node();
      std::this_thread::sleep_for(std::chrono::milliseconds(opt.start_interval_ms));
    }
  } catch (const std::exception& e) {
    std::cerr << "atoll_sim_nodes: cannot connect to " << opt.head << ": " << e.what() << "\n";
    return 1;
  }
  // Each kind of churn keeps its own debt of events, paid as it grows past one.
  double kill_debt = 0, silence_debt = 0, leave_debt = 0, join_debt = 0;
  double last_status = 0, last_tick = elapsed();
  while (!stop_requested && elapsed() < opt.seconds) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const double now = elapsed(), dt = now - last_tick;
    last_tick = now;
    const bool churn_over = churn_stopped || (opt.churn_for_s > 0 && now >= opt.churn_after_s + opt.churn_for_s);
    if ((now >= opt.churn_after_s || churn_requested) && !churn_over && opt.churn.any()) {
      kill_debt += opt.churn.kills * dt;
      silence_debt += opt.churn.silences * dt;
      leave_debt += opt.churn.leaves * dt;
      join_debt += opt.churn.joins * dt;
      for (; kill_debt >= 1; kill_debt -= 1) sim.fault("kill");
      for (; silence_debt >= 1; silence_debt -= 1) sim.fault("silence");
      for (; leave_debt >= 1; leave_debt -= 1) sim.fault("leave");
      for (; join_debt >= 1; join_debt -= 1) sim.start_node();
    }
    if (now - last_status >= 1.0) {
      sim.report_status(now);
      last_status = now;
    }
  }
  sim.report_agreement();
  // Out as a killed process goes: the connections close with the process, all at once. A
  // node-by-node stop takes minutes at a thousand nodes, and the head would re-place and
  // republish through it.
  std::cout << std::flush;
  std::_Exit(0);
}

}  // namespace

int main(int argc, char** argv) {
  options opt;
  CLI::App app{"N simulated nodes (the real node agent and worker, a stand-in model) against a real head"};
  app.add_option("--head", opt.head, "the head's endpoint")->required();
  app.add_option("--keys", opt.keys_dir, "the cluster's CURVE key folder (`atoll keygen`)");
  app.add_flag("--insecure", opt.insecure, "plain TCP to a head that is not on loopback");
  app.add_option("--nodes", opt.nodes, "nodes to start (default 10)")->check(CLI::Range(1, 100000));
  app.add_option("--values", opt.values, "the stand-in model's fp32 values (default 1024)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--step-ms", opt.step_ms, "how long a stand-in step waits (default 200)")->check(CLI::Range(1, 60000));
  app.add_option("--start-interval-ms", opt.start_interval_ms, "pause between two nodes' starts (default 2)")
      ->check(CLI::Range(0, 60000));
  app.add_option("--seconds", opt.seconds, "how long to run (default 60)")->check(CLI::PositiveNumber);
  app.add_option("--churn-after", opt.churn_after_s,
                 "seconds before the churn starts (default 10), or SIGUSR1 starts it earlier");
  app.add_option("--churn-for", opt.churn_for_s, "seconds the churn lasts (default: to the end, or SIGUSR2)");
  app.add_option("--kills", opt.churn.kills, "kills a second (the connection closes, nothing said)");
  app.add_option("--silences", opt.churn.silences, "silences a second (the node sends nothing more)");
  app.add_option("--leaves", opt.churn.leaves, "leaves a second (as SIGTERM: a Goodbye)");
  app.add_option("--joins", opt.churn.joins, "new nodes a second");
  app.add_option("--seed", opt.seed, "the churn's random choices (default 1)");
  CLI11_PARSE(app, argc, argv);
  atl::set_log_name("atoll sim");
  std::signal(SIGINT, [](int) { stop_requested = 1; });
  std::signal(SIGTERM, [](int) { stop_requested = 1; });
  std::signal(SIGUSR1, [](int) { churn_requested = 1; });
  std::signal(SIGUSR2, [](int) { churn_stopped = 1; });
  return run(opt);
}
