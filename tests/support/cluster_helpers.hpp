#pragma once
// Helpers for process tests that drive a real head and nodes: find the head's endpoint,
// ask it through the control protocol, wait for rounds, map node ids to processes, and
// check the invariants at the end of a run. Needs ATOLL_BIN (the atoll binary).
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/transport/control_client.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/test_dir.hpp"

namespace atl::testing {

// The endpoint `atoll up` wrote to RUN_DIR/head.endpoint; empty if the head died or took
// longer than 30 s.
inline std::string wait_for_endpoint(const std::string& run_dir, subprocess& head) {
  for (int i = 0; i < 600 && head.running(); ++i) {
    std::ifstream in(run_dir + "/head.endpoint");
    std::string ep;
    if (std::getline(in, ep) && !ep.empty()) return ep;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return {};
}

// One control request; a null json when the head does not answer or refuses.
inline nlohmann::json ask(const std::string& head, const std::string& command, const link_security& keys = {}) {
  auto reply = control_request(head, command, "", std::chrono::milliseconds(3000), keys);
  if (!reply || !reply->ok) return nlohmann::json();
  return nlohmann::json::parse(reply->json, nullptr, false);
}

// Fragment 0's round, or -1 when the head does not say.
inline int round_of(const std::string& head) {
  const auto fragments = ask(head, "fragments");
  return fragments.is_array() && !fragments.empty() ? fragments[0]["round"].get<int>() : -1;
}

inline bool wait_for_round(const std::string& head, int round) {
  return eventually([&] { return round_of(head) >= round; }, std::chrono::seconds(60), std::chrono::milliseconds(100));
}

// `count` `atoll join` processes, logging to DIR/nodeK.log; with run dirs DIR/nodeK (they
// may host the keeper replica); `more`: further flags.
inline std::vector<std::unique_ptr<subprocess>> join_nodes(const std::string& atoll, const std::string& head, int count,
                                                           const temp_dir& dir, bool with_run_dirs = false,
                                                           const std::vector<std::string>& more = {}) {
  std::vector<std::unique_ptr<subprocess>> nodes;
  for (int i = 0; i < count; ++i) {
    std::vector<std::string> args = {atoll, "join", "--head", head, "--threads", "1"};
    args.insert(args.end(), more.begin(), more.end());
    if (with_run_dirs) args.insert(args.end(), {"--run-dir", dir.sub("node" + std::to_string(i))});
    nodes.push_back(std::make_unique<subprocess>(args, dir.sub("node" + std::to_string(i) + ".log")));
  }
  return nodes;
}

// "node/N" hosting coord/0; empty if none is placed.
inline std::string coordinator_host(const std::string& head, const std::string& coordinator = "coord/0") {
  for (const auto& a : ask(head, "actors"))
    if (a["id"] == coordinator) return a["process"];
  return {};
}

// The process of node "node/N", matched by the pid the head reports.
inline subprocess* process_of(const std::string& head, const std::string& node,
                              const std::vector<std::unique_ptr<subprocess>>& nodes) {
  for (const auto& m : ask(head, "members"))
    if ("node/" + std::to_string(m["node_id"].get<int>()) == node)
      for (const auto& n : nodes)
        if (n->pid() == m["pid"].get<int>()) return n.get();
  return nullptr;
}

// An mlp run that lasts long enough for faults: rounds of 400 steps.
inline std::vector<std::string> mlp_head(const std::string& head_dir, long steps,
                                         const std::vector<std::string>& more) {
  std::vector<std::string> args = {ATOLL_BIN,   "up",
                                   "--listen",  "tcp://127.0.0.1:0",
                                   "--run-dir", head_dir,
                                   "--set",     "run.example=mlp",
                                   "--set",     "model.width=32",
                                   "--set",     "run.steps=" + std::to_string(steps),
                                   "--set",     "diloco.sync_every=400",
                                   "--set",     "run.eval_every=" + std::to_string(steps / 2),
                                   "--set",     "run.min_workers=2"};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// mlp_head with fast failure detection (heartbeats every 300 ms, a 2 s lease) and every
// round kept, for the tests that kill processes and check the keeper's rounds.
inline std::vector<std::string> fast_lease_head(const std::string& head_dir, long steps = 16000) {
  return mlp_head(
      head_dir, steps,
      {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000", "--set", "storage.keep_rounds=100"});
}

// Workers at the fragment's final round must hold the keeper's digest; returns how many.
inline int agreeing_at_final_round(const nlohmann::json& fragments) {
  const int final_round = fragments[0]["round"];
  int agreeing = 0;
  for (const auto& w : fragments[0]["workers"]) {
    if (w["round"] != final_round) continue;
    EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
    ++agreeing;
  }
  return agreeing;
}

// Participations of `worker` in the rounds of a metrics file.
inline int rounds_with(const std::string& metrics, const std::string& worker) {
  int count = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "round") continue;
    for (const auto& w : j["workers"]) count += w == worker;
  }
  return count;
}

inline void shut_down(const std::string& ep, subprocess& head) {
  EXPECT_TRUE(control_request(ep, "down", "", std::chrono::milliseconds(5000)));
  EXPECT_EQ(head.wait(std::chrono::seconds(15)), 0) << head.output();
}

// S3/S4: the keeper holds every round from 0 to `final_round` once, in order (the run
// must keep them all: storage.keep_rounds above the round count).
inline void expect_every_round_kept(const std::string& head, int final_round) {
  std::int64_t expected = 0;
  for (const auto& c : ask(head, "checkpoints")) EXPECT_EQ(c["round"].get<std::int64_t>(), expected++) << c.dump();
  EXPECT_EQ(expected, final_round + 1);
}

// With storage.keepers = nodes: the replicas' stores under `dir` hold every round from 1 to
// `final_round`, two stores each, one digest per round (S3, S4); none is in `head_dir`'s
// store after the seed (empty: not checked), as no commit crosses the head's link.
// `more`: further export flags (--registry).
inline void expect_every_round_on_two_replicas(const std::string& atoll, const temp_dir& dir, std::int64_t final_round,
                                               const std::string& head_dir = "",
                                               const std::vector<std::string>& more = {}) {
  std::vector<std::string> args = {atoll, "export", "--run-dir", dir.str(), "--list", "--json"};
  args.insert(args.end(), more.begin(), more.end());
  auto [code, out] = run_command(args, dir.sub("list.log"));
  ASSERT_EQ(code, 0) << out;
  std::map<std::int64_t, int> stores_of;
  for (const auto& r : nlohmann::json::parse(out.substr(out.find('[')))) {
    EXPECT_EQ(stores_of.count(r["round"]), 0u) << "two digests for round " << r["round"];
    stores_of[r["round"]] = static_cast<int>(r["stores"].size());
    if (r["round"] == 0 || head_dir.empty()) continue;  // the seed may be committed before the replicas are placed
    for (const auto& path : r["stores"])
      EXPECT_EQ(path.get<std::string>().find(head_dir), std::string::npos) << r.dump();
  }
  for (std::int64_t round = 1; round <= final_round; ++round) EXPECT_GE(stores_of[round], 2) << "round " << round;
}

}  // namespace atl::testing
