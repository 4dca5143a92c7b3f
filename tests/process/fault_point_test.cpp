// Process tier, kills at exact protocol steps (RELIABILITY.md fault matrix), through the
// named fault points of runtime/process/fault_point.hpp: a process armed with
// ATOLL_FAULT_POINT=NAME@N SIGKILLs itself the N-th time it passes NAME. Each test checks
// that the run finishes (L1), that every survivor at the final round holds the keeper's
// bytes (S1, S2), and that the keeper holds every round once, in order (S3, S4).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::ask;
using testing::subprocess;
using namespace std::chrono_literals;

constexpr int total_rounds = 40;  // 16000 steps, a round every 400

subprocess* start_node(std::vector<std::unique_ptr<subprocess>>& nodes, const std::string& ep,
                       const testing::temp_dir& dir, const std::string& fault = {}) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!fault.empty()) env.emplace_back("ATOLL_FAULT_POINT", fault);
  nodes.push_back(
      std::make_unique<subprocess>(std::vector<std::string>{ATOLL_BIN, "join", "--head", ep, "--threads", "1"},
                                   dir.sub("node" + std::to_string(nodes.size()) + ".log"), env));
  return nodes.back().get();
}

// Three nodes; the first registers alone, so it is node/1 and hosts coord/0. `fault`
// arms node `armed` (0: the coordinator's host, 1: another node).
std::vector<std::unique_ptr<subprocess>> three_nodes(const std::string& ep, const testing::temp_dir& dir, int armed,
                                                     const std::string& fault) {
  std::vector<std::unique_ptr<subprocess>> nodes;
  start_node(nodes, ep, dir, armed == 0 ? fault : "");
  EXPECT_TRUE(testing::eventually([&] { return ask(ep, "members").size() == 1; }, 20s, 50ms));
  start_node(nodes, ep, dir, armed == 1 ? fault : "");
  start_node(nodes, ep, dir);
  return nodes;
}

void expect_killed_at(subprocess& victim, const std::string& point) {
  EXPECT_EQ(victim.wait(60s), 128 + SIGKILL) << victim.output();
  EXPECT_NE(victim.output().find("fault point " + point + " reached"), std::string::npos) << victim.output();
}

void expect_survivors_finish_and_agree(const std::string& ep, std::vector<std::unique_ptr<subprocess>>& nodes,
                                       const subprocess* victim, const subprocess& head) {
  for (auto& n : nodes)
    if (n.get() != victim) {
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished") << status.dump();
  const json fragments = ask(ep, "fragments");
  EXPECT_EQ(fragments[0]["round"], total_rounds);
  const int survivors = static_cast<int>(nodes.size()) - (victim ? 1 : 0);
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), survivors) << fragments.dump();
  testing::expect_every_round_kept(ep, total_rounds);
}

// Kills the coordinator's node at `point` (the 5th pass); the survivors must finish with
// the keeper's bytes at the final round and every round kept, after a re-placement.
void expect_a_coordinator_killed_at_loses_no_round(const std::string& point) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(testing::fast_lease_head(head_dir), dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = three_nodes(ep, dir, 0, point + "@5");
  expect_killed_at(*nodes[0], point);
  expect_survivors_finish_and_agree(ep, nodes, nodes[0].get(), head);
  EXPECT_NE(head.output().find("re-placed on"), std::string::npos) << head.output();
  testing::shut_down(ep, head);
}

// The coordinator dies after the keeper acknowledged round 5 and before any worker got its
// result confirmed (early results: they hold it provisional). The re-placed coordinator
// reloads round 5 and announces it; the survivors, which still wait on round 5, adopt it:
// nobody applies round 5 twice or skips it (S2).
TEST(FaultPoints, ACoordinatorKilledBetweenCommitAndReleaseLosesNoRound) {
  expect_a_coordinator_killed_at_loses_no_round("coordinator.committed");
}

// Early results: the coordinator dies once round 5's results went out provisional, while
// the keeper writes it (it may or may not have acknowledged it yet). The survivors hold a
// result nobody confirmed: they must not apply it. The re-placed coordinator resumes from
// whatever round the keeper has, and every survivor ends with the keeper's bytes (S1, S2).
TEST(FaultPoints, ACoordinatorKilledWithItsResultsProvisionalLosesNoRound) {
  expect_a_coordinator_killed_at_loses_no_round("coordinator.provisional");
}

// Three nodes train while the head (its keeper with it) is SIGKILLed at `point` (NAME@N);
// the head is started again on the same run dir and endpoint, and the survivors must finish
// and agree with the keeper, and no node may see a commit refused.
void head_killed_at_then_restarted(const std::string& point, std::vector<std::string> extra_settings) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  std::vector<std::string> settings = {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000",
                                       "--set", "storage.keep_rounds=100"};
  settings.insert(settings.end(), extra_settings.begin(), extra_settings.end());
  auto head =
      std::make_unique<subprocess>(testing::mlp_head(head_dir, 16000, settings), dir.sub("head.log"),
                                   std::vector<std::pair<std::string, std::string>>{{"ATOLL_FAULT_POINT", point}});
  const std::string ep = testing::wait_for_endpoint(head_dir, *head);
  ASSERT_FALSE(ep.empty()) << head->output();
  auto nodes = three_nodes(ep, dir, -1, "");
  expect_killed_at(*head, point.substr(0, point.find('@')));

  std::remove((head_dir + "/head.endpoint").c_str());
  head = std::make_unique<subprocess>(std::vector<std::string>{ATOLL_BIN, "up", "--listen", ep, "--run-dir", head_dir},
                                      dir.sub("head2.log"));
  ASSERT_EQ(testing::wait_for_endpoint(head_dir, *head), ep) << head->output();
  expect_survivors_finish_and_agree(ep, nodes, nullptr, *head);
  for (const auto& n : nodes) EXPECT_EQ(n->output().find("keeper refused"), std::string::npos) << n->output();
  testing::shut_down(ep, *head);
}

// The keeper (in the head) dies after round 5 is durable and before its acknowledgement
// left. The head is started again; the coordinator's retry of round 5 finds it committed
// with the same digest and is acknowledged, so the run goes on from round 6.
TEST(FaultPoints, AKeeperKilledBetweenWriteAndAckIsRestartedAndTheRetryIsAcknowledged) {
  head_killed_at_then_restarted("keeper.written@5", {});
}

// The keeper (in the head) dies in the middle of appending round 5's record: its file is
// written and the key that names it is not. The restarted keeper does not have round 5 (the
// file is swept as unlisted), the coordinator's retry appends it again, and the run
// finishes with every round kept once.
TEST(FaultPoints, AKeeperKilledMidAppendIsRestartedAndTheRetryAppendsTheRoundOnce) {
  head_killed_at_then_restarted("keeper.appending@5", {});
}

// The head's keeper dies as it starts its second snapshot (round 6, storage.snapshot_every
// = 3), after acknowledging the round. The restarted head's keeper reads round 6 back from
// the snapshot of round 3 and the round log after it (replayed, digests checked), and the
// run finishes with every worker at the keeper's digest.
TEST(FaultPoints, AKeeperKilledDuringItsSnapshotRestartsFromTheLogAndTheRunFinishes) {
  head_killed_at_then_restarted("keeper.snapshotting@2", {"--set", "storage.snapshot_every=3"});
}

// A node dies right after its worker sent its round-5 contribution (worker and node are
// one process). Its lease runs out, the round completes with the survivors.
TEST(FaultPoints, AWorkerKilledMidRoundIsDroppedAndTheRoundCompletesWithoutIt) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(testing::fast_lease_head(head_dir), dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = three_nodes(ep, dir, 1, "worker.contributed@5");
  expect_killed_at(*nodes[1], "worker.contributed");
  expect_survivors_finish_and_agree(ep, nodes, nodes[1].get(), head);
  int dead = 0;
  for (const auto& m : ask(ep, "members")) dead += m["state"] == "dead";
  EXPECT_EQ(dead, 1);
  testing::shut_down(ep, head);
}

}  // namespace
}  // namespace atl
