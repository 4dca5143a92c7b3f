// Process tier, RELIABILITY.md fault "SIGKILL the node hosting a coordinator": three nodes
// train; the node hosting coord/0 is killed mid-run. Its lease expires, the registry
// re-places the coordinator on a survivor, which reloads the committed state from the
// keeper; the survivors resync and finish, agreeing with the keeper (S1), no committed
// round is lost or repeated (S3, S4), and nothing hangs (L1).
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/control_client.hpp"
#include "tests/subprocess.hpp"
#include "tests/test_dir.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::subprocess;
using namespace std::chrono_literals;

json ask(const std::string& head, const std::string& command) {
  auto reply = control_request(head, command, "", 3000ms);
  if (!reply || !reply->ok) return json();
  return json::parse(reply->json, nullptr, false);
}

TEST(Failover, KillingTheNodeOfACoordinatorReplacesItAndTheRunFinishes) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--set",
                   "run.example=mlp", "--set", "model.width=32", "--set", "run.steps=16000", "--set",
                   "diloco.sync_every=400", "--set", "run.eval_every=8000", "--set", "run.min_workers=2", "--set",
                   "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000", "--set", "storage.keep_rounds=100"},
                  dir.sub("head.log"));
  std::string ep;
  for (int i = 0; i < 600 && ep.empty() && head.running(); ++i) {
    std::ifstream(head_dir + "/head.endpoint") >> ep;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(ep.empty()) << head.output();
  std::vector<std::unique_ptr<subprocess>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(std::make_unique<subprocess>(
        std::vector<std::string>{ATOLL_BIN, "join", "--head", ep, "--threads", "1"},
        dir.sub("node" + std::to_string(i) + ".log")));

  // Wait for round 3, then find the node hosting coord/0 and its process.
  json fragments;
  for (int i = 0; i < 600; ++i) {
    fragments = ask(ep, "fragments");
    if (fragments.is_array() && !fragments.empty() && fragments[0]["round"].get<int>() >= 3) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(fragments[0]["round"].get<int>(), 3) << head.output();
  std::string host;
  for (const auto& a : ask(ep, "actors"))
    if (a["id"] == "coord/0") host = a["process"];
  ASSERT_FALSE(host.empty());
  subprocess* victim = nullptr;
  for (const auto& m : ask(ep, "members"))
    if ("node/" + std::to_string(m["node_id"].get<int>()) == host)
      for (auto& n : nodes)
        if (n->pid() == m["pid"].get<int>()) victim = n.get();
  ASSERT_NE(victim, nullptr) << "no process for " << host;
  const int killed_at = ask(ep, "fragments")[0]["round"];
  victim->signal(SIGKILL);
  EXPECT_EQ(victim->wait(5s), 128 + SIGKILL);

  // The survivors finish on their own.
  for (auto& n : nodes) {
    if (n.get() == victim) continue;
    ASSERT_EQ(n->wait(90s), 0) << nodes[0]->output() << nodes[1]->output() << nodes[2]->output() << head.output();
  }

  const json status = ask(ep, "status");
  ASSERT_TRUE(status.is_object());
  EXPECT_EQ(status["state"], "finished") << status.dump();
  int dead = 0;
  for (const auto& m : status["members"]) dead += m["state"] == "dead";
  EXPECT_EQ(dead, 1) << status["members"].dump();
  EXPECT_NE(head.output().find("re-placed on"), std::string::npos) << head.output();

  fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_GT(final_round, killed_at + 5);  // training went on well after the kill
  EXPECT_NE(fragments[0]["coordinator"], host);
  int agreeing = 0;
  for (const auto& w : fragments[0]["workers"])
    if (w["round"] == final_round) {
      EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
      ++agreeing;
    }
  EXPECT_EQ(agreeing, 2) << fragments.dump();

  // S3/S4: the keeper's rounds only go up, and every round committed before the kill is there.
  std::int64_t previous = -1;
  bool seen_killed_at = false;
  for (const auto& c : ask(ep, "checkpoints")) {
    EXPECT_GT(c["round"].get<std::int64_t>(), previous);
    previous = c["round"];
    seen_killed_at = seen_killed_at || c["round"] == killed_at;
  }
  EXPECT_TRUE(seen_killed_at);
  EXPECT_EQ(previous, final_round);
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

// `atoll leave` and SIGTERM drain a node: it says goodbye, its coordinator moves at once,
// and no round waits for its workers (the lease is the default 20 s; no round may take
// even half of it).
TEST(Failover, LeaveAndSigtermDrainNodesWithoutStallingARound) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--metrics", metrics,
                   "--set", "run.example=mlp", "--set", "model.width=32", "--set", "run.steps=16000", "--set",
                   "diloco.sync_every=400", "--set", "run.eval_every=8000", "--set", "run.min_workers=2"},
                  dir.sub("head.log"));
  std::string ep;
  for (int i = 0; i < 600 && ep.empty() && head.running(); ++i) {
    std::ifstream(head_dir + "/head.endpoint") >> ep;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(ep.empty()) << head.output();
  std::vector<std::unique_ptr<subprocess>> nodes;
  for (int i = 0; i < 4; ++i)
    nodes.push_back(std::make_unique<subprocess>(
        std::vector<std::string>{ATOLL_BIN, "join", "--head", ep, "--threads", "1"},
        dir.sub("node" + std::to_string(i) + ".log")));
  json fragments;
  for (int i = 0; i < 600; ++i) {
    fragments = ask(ep, "fragments");
    if (fragments.is_array() && !fragments.empty() && fragments[0]["round"].get<int>() >= 2) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(fragments[0]["round"].get<int>(), 2) << head.output();
  const auto process_of = [&](const std::string& node) -> subprocess* {
    for (const auto& m : ask(ep, "members"))
      if ("node/" + std::to_string(m["node_id"].get<int>()) == node)
        for (auto& n : nodes)
          if (n->pid() == m["pid"].get<int>()) return n.get();
    return nullptr;
  };
  auto [bad_code, bad_out] = testing::run_command({ATOLL_BIN, "leave", "99", "--head", ep}, dir.sub("leave99.log"));
  EXPECT_EQ(bad_code, 1);
  EXPECT_NE(bad_out.find("no node 99"), std::string::npos) << bad_out;

  // Leave the node hosting coord/0.
  std::string host;
  for (const auto& a : ask(ep, "actors"))
    if (a["id"] == "coord/0") host = a["process"];
  subprocess* leaver = process_of(host);
  ASSERT_NE(leaver, nullptr);
  auto [code, out] = testing::run_command({ATOLL_BIN, "leave", host.substr(5), "--head", ep}, dir.sub("leave.log"));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(leaver->wait(15s), 0) << leaver->output();

  // SIGTERM another node.
  subprocess* stopped = nullptr;
  for (auto& n : nodes)
    if (n.get() != leaver && !stopped) stopped = n.get();
  stopped->signal(SIGTERM);
  EXPECT_EQ(stopped->wait(15s), 0) << stopped->output();
  const int round_after_leaves = ask(ep, "fragments")[0]["round"];

  for (auto& n : nodes) {
    if (n.get() == leaver || n.get() == stopped) continue;
    ASSERT_EQ(n->wait(90s), 0) << n->output() << head.output();
  }
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished");
  for (const auto& m : status["members"]) EXPECT_EQ(m["state"], "left") << status["members"].dump();
  fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_GT(final_round, round_after_leaves);
  for (const auto& w : fragments[0]["workers"]) {
    if (w["round"] != final_round) continue;
    EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
  }

  // No round waited for a lease.
  double longest = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "round") longest = std::max(longest, j.value("duration_s", 0.0));
  }
  EXPECT_LT(longest, 10.0);
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

// `atoll join` against a running cluster: the node is admitted, its worker fetches the
// committed state, takes part in later rounds, and ends with the same digest as the others.
TEST(Failover, ANodeJoiningMidRunTakesPartAndAgrees) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--metrics", metrics,
                   "--set", "run.example=mlp", "--set", "model.width=32", "--set", "run.steps=12000", "--set",
                   "diloco.sync_every=400", "--set", "run.eval_every=6000", "--set", "run.min_workers=2"},
                  dir.sub("head.log"));
  std::string ep;
  for (int i = 0; i < 600 && ep.empty() && head.running(); ++i) {
    std::ifstream(head_dir + "/head.endpoint") >> ep;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node2.log"));
  json fragments;
  for (int i = 0; i < 600; ++i) {
    fragments = ask(ep, "fragments");
    if (fragments.is_array() && !fragments.empty() && fragments[0]["round"].get<int>() >= 3) break;
    std::this_thread::sleep_for(100ms);
  }
  const int joined_at = fragments[0]["round"];
  ASSERT_GE(joined_at, 3) << head.output();
  subprocess joiner({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node3.log"));

  EXPECT_EQ(node1.wait(120s), 0) << node1.output();
  EXPECT_EQ(node2.wait(120s), 0) << node2.output();
  EXPECT_EQ(joiner.wait(120s), 0) << joiner.output() << head.output();
  fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  ASSERT_EQ(fragments[0]["workers"].size(), 3u) << fragments.dump();
  for (const auto& w : fragments[0]["workers"]) {
    EXPECT_EQ(w["round"], final_round) << w.dump();
    EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
  }
  // The joiner (worker/3.0) contributed to rounds after it joined: the coordinator's round
  // reports list it as a participant.
  int joiner_rounds = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "round") continue;
    for (const auto& w : j["workers"]) joiner_rounds += w == "worker/3.0";
  }
  EXPECT_GE(joiner_rounds, 3) << "the joiner took part in " << joiner_rounds << " rounds\n" << joiner.output();
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

// SIGSTOP a node past its lease, then SIGCONT: it is declared dead, its stale messages are
// refused, it registers again as a new node, and its new worker resyncs and agrees.
TEST(Failover, ANodeStoppedPastItsLeaseIsFencedAndRejoins) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--set",
                   "run.example=mlp", "--set", "model.width=32", "--set", "run.steps=16000", "--set",
                   "diloco.sync_every=400", "--set", "run.eval_every=8000", "--set", "run.min_workers=2", "--set",
                   "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000"},
                  dir.sub("head.log"));
  std::string ep;
  for (int i = 0; i < 600 && ep.empty() && head.running(); ++i) {
    std::ifstream(head_dir + "/head.endpoint") >> ep;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_FALSE(ep.empty()) << head.output();
  std::vector<std::unique_ptr<subprocess>> nodes;
  for (int i = 0; i < 3; ++i)
    nodes.push_back(std::make_unique<subprocess>(
        std::vector<std::string>{ATOLL_BIN, "join", "--head", ep, "--threads", "1"},
        dir.sub("node" + std::to_string(i) + ".log")));
  json fragments;
  for (int i = 0; i < 600; ++i) {
    fragments = ask(ep, "fragments");
    if (fragments.is_array() && !fragments.empty() && fragments[0]["round"].get<int>() >= 2) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_GE(fragments[0]["round"].get<int>(), 2) << head.output();
  // Stop a node that does not host the coordinator.
  std::string host;
  for (const auto& a : ask(ep, "actors"))
    if (a["id"] == "coord/0") host = a["process"];
  subprocess* frozen = nullptr;
  for (const auto& m : ask(ep, "members"))
    if ("node/" + std::to_string(m["node_id"].get<int>()) != host)
      for (auto& n : nodes)
        if (n->pid() == m["pid"].get<int>() && !frozen) frozen = n.get();
  ASSERT_NE(frozen, nullptr);
  frozen->signal(SIGSTOP);
  bool declared_dead = false;
  for (int i = 0; i < 100 && !declared_dead; ++i) {
    for (const auto& m : ask(ep, "members")) declared_dead = declared_dead || m["state"] == "dead";
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(declared_dead);
  std::this_thread::sleep_for(1s);  // a round or two go on without it
  frozen->signal(SIGCONT);

  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
  EXPECT_NE(frozen->output().find("registering again"), std::string::npos) << frozen->output();
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished");
  EXPECT_EQ(status["members"].size(), 4u) << status["members"].dump();  // the frozen node came back as a new one
  EXPECT_GE(status["refused"]["total"].value("stale_epoch", 0), 1) << status["refused"].dump();
  fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  int agreeing = 0;
  for (const auto& w : fragments[0]["workers"]) {
    if (w["round"] != final_round) continue;
    EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
    ++agreeing;
  }
  EXPECT_EQ(agreeing, 3) << fragments.dump();  // two that kept going and the one that came back
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

}  // namespace
}  // namespace atl
