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

}  // namespace
}  // namespace atl
