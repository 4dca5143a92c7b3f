// The contract a controller acts on (deploy/kubernetes, docs/operations.md "Exit codes and
// probes"), produced by real processes: a node's probes before it is a member, while a
// member, while its head is down, and when its own actor system is stuck; the head's probes
// without a token; the exit status of each way a node ends.
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

#include "runtime/core/exit_status.hpp"
#include "tests/support/cluster_helpers.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using testing::subprocess;

// GET path's status at 127.0.0.1:port; 0 when nothing answers.
int probe(int port, const std::string& path) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(1, 0);
  client.set_read_timeout(2, 0);
  auto res = client.Get(path);
  return res ? res->status : 0;
}

std::vector<std::string> node_with_probes(const std::string& head, int port, const std::string& grace = "3") {
  return {ATOLL_BIN,          "join",
          "--head",           head,
          "--threads",        "1",
          "--wait-for-head",  "0",
          "--health",         "tcp://127.0.0.1:" + std::to_string(port),
          "--liveness-grace", grace};
}

TEST(Probes, ANodeIsLiveWhileItWaitsReadyOnceAMemberAndStaysLiveWhileItsHeadIsDown) {
  testing::temp_dir dir;
  const int head_port = testing::free_port(), health = testing::free_port();
  const std::string ep = "tcp://127.0.0.1:" + std::to_string(head_port);
  subprocess node(node_with_probes(ep, health), dir.sub("node.log"));
  // No head yet: alive (it waits), not ready (not a member), past its grace too.
  ASSERT_TRUE(testing::eventually([&] { return probe(health, "/livez") == 200; }, 10s, 100ms)) << node.output();
  EXPECT_EQ(probe(health, "/readyz"), 503);
  std::this_thread::sleep_for(4s);
  EXPECT_EQ(probe(health, "/livez"), 200) << "waiting for the head is living: " << node.output();
  EXPECT_EQ(probe(health, "/somewhere"), 404);

  auto args = testing::mlp_head(dir.sub("head"), 1000000, {"--set", "cluster.heartbeat_ms=300"});
  args[3] = ep;  // --listen at the port the node waits on
  auto head = std::make_unique<subprocess>(args, dir.sub("head.log"));
  ASSERT_TRUE(testing::eventually([&] { return probe(health, "/readyz") == 200; }, 30s, 100ms))
      << node.output() << head->output();
  // The head lost: the node's probes ask nothing outside the process, so it stays alive
  // (no restart storm) past several of its graces.
  head->signal(SIGKILL);
  head->wait(5s);
  for (int i = 0; i < 8; ++i) {
    std::this_thread::sleep_for(1s);
    EXPECT_EQ(probe(health, "/livez"), 200) << "second " << i << ": " << node.output();
  }
  node.signal(SIGTERM);
  EXPECT_EQ(node.wait(20s), code_of(exit_status::drained)) << node.output();
}

TEST(Probes, ANodeWhoseActorSystemIsStuckFailsLivenessWithinItsGrace) {
  testing::temp_dir dir;
  subprocess head(testing::mlp_head(dir.sub("head"), 1000000, {"--set", "cluster.heartbeat_ms=300"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(dir.sub("head"), head);
  ASSERT_FALSE(ep.empty()) << head.output();
  const int health = testing::free_port();
  subprocess node(node_with_probes(ep, health), dir.sub("node.log"), {{"ATOLL_FAIL_POINT", "node.stall"}});
  // The agent stalls on its first tick as a member: ready for a moment at most, then no
  // beat, and /livez fails once the grace (3 s) has passed.
  ASSERT_TRUE(testing::eventually([&] { return probe(health, "/livez") == 503; }, 20s, 200ms)) << node.output();
  EXPECT_EQ(probe(health, "/readyz"), 503) << "not live, so not ready";
}

TEST(Probes, TheHeadsProbesAnswerWithoutATokenWhereEverythingElseNeedsOne) {
  testing::temp_dir dir;
  // Bound off loopback (every address): reads need the bearer token, the probes do not.
  const int http = testing::free_port();
  std::string keys = dir.sub("keys");
  auto [code, out] = testing::run_command({ATOLL_BIN, "keygen", "--out", keys}, dir.sub("keygen.log"));
  ASSERT_EQ(code, 0) << out;
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", dir.sub("head"), "--keys", keys,
                   "--http", "tcp://0.0.0.0:" + std::to_string(http), "--set", "run.example=mlp"},
                  dir.sub("head.log"));
  ASSERT_FALSE(testing::wait_for_endpoint(dir.sub("head"), head).empty()) << head.output();
  ASSERT_TRUE(testing::eventually([&] { return probe(http, "/livez") == 200; }, 10s, 100ms)) << head.output();
  EXPECT_EQ(probe(http, "/readyz"), 200) << "a head serving here leads";
  EXPECT_EQ(probe(http, "/api/status"), 401) << "the rest still needs the token";
}

TEST(ExitStatus, EachWayANodeEndsHasItsStatus) {
  testing::temp_dir dir;
  // A configuration it cannot use: config (2), before anything starts.
  auto [bad_health, bad_out] = testing::run_command(
      {ATOLL_BIN, "join", "--head", "tcp://127.0.0.1:1", "--health", "http://nowhere"}, dir.sub("bad.log"));
  EXPECT_EQ(bad_health, code_of(exit_status::config)) << bad_out;
  EXPECT_NE(bad_out.find("--health http://nowhere: not tcp://HOST:PORT"), std::string::npos) << bad_out;
  // A flag it does not have: config too (a controller must not retry it).
  auto [bad_flag, bad_flag_out] =
      testing::run_command({ATOLL_BIN, "join", "--head", "tcp://127.0.0.1:1", "--heath", "x"}, dir.sub("flag.log"));
  EXPECT_EQ(bad_flag, code_of(exit_status::config)) << bad_flag_out;
  // No head within --wait-for-head: retriable (1).
  auto [no_head, no_head_out] = testing::run_command(
      {ATOLL_BIN, "join", "--head", "tcp://127.0.0.1:1", "--wait-for-head", "2"}, dir.sub("nohead.log"), 30s);
  EXPECT_EQ(no_head, code_of(exit_status::retriable)) << no_head_out;
  // The run ends: finished (0); SIGTERM mid-run: drained (143).
  subprocess head(testing::mlp_head(dir.sub("head"), 300, {"--set", "cluster.heartbeat_ms=300"}), dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(dir.sub("head"), head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 2, dir);
  for (auto& n : nodes) EXPECT_EQ(n->wait(120s), code_of(exit_status::finished)) << n->output() << head.output();
}

}  // namespace
}  // namespace atl
