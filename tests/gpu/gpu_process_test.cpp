// gpu tier, real processes on loopback: CPU and CUDA workers in one run hold the same
// global state, and a GPU node joins a running CPU cluster, takes part and leaves.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cluster_helpers.hpp"
#include "tests/support/gpu_skip.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::ask;
using testing::subprocess;
using namespace std::chrono_literals;

// Every fragment: each worker at the final round holds the keeper's digest; returns how
// many workers did, summed over fragments.
int agreeing_in_every_fragment(const json& fragments) {
  int agreeing = 0;
  for (const auto& f : fragments) agreeing += testing::agreeing_at_final_round(json::array({f}));
  return agreeing;
}

// The small GPT in two fragments, fp4 with error feedback and overlap: the device codecs,
// residuals and merges carry the GPU worker's side of every round.
TEST(Gpu, ACpuAndACudaWorkerTrainTogetherAndHoldTheSameGlobalState) {
  ATOLL_SKIP_WITHOUT_GPU();
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head({ATOLL_BIN,   "up",
                   "--listen",  "tcp://127.0.0.1:0",
                   "--run-dir", head_dir,
                   "--set",     "run.steps=120",
                   "--set",     "diloco.sync_every=20",
                   "--set",     "diloco.fragments=2",
                   "--set",     "diloco.codec=fp4",
                   "--set",     "diloco.error_feedback=true",
                   "--set",     "diloco.overlap=2",
                   "--set",     "diloco.alpha=0.5",
                   "--set",     "run.eval_every=60",
                   "--set",     "model.layers=2",
                   "--set",     "storage.keep_rounds=100"},
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess cpu({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("cpu.log"));
  subprocess gpu({ATOLL_BIN, "join", "--head", ep, "--devices", "cuda:0"}, dir.sub("gpu.log"));
  ASSERT_EQ(gpu.wait(180s), 0) << gpu.output();
  ASSERT_EQ(cpu.wait(180s), 0) << cpu.output();
  const json fragments = ask(ep, "fragments");
  ASSERT_EQ(fragments.size(), 2u) << fragments.dump();
  EXPECT_EQ(agreeing_in_every_fragment(fragments), 4) << fragments.dump();
  const json members = ask(ep, "members");
  bool saw_cuda = false;
  for (const auto& m : members)
    for (const auto& d : m["devices"]) saw_cuda |= d == "cuda:0";
  EXPECT_TRUE(saw_cuda) << members.dump();
  EXPECT_NE(gpu.output().find("replica on cuda:0"), std::string::npos) << gpu.output();
  testing::shut_down(ep, head);
}

TEST(Gpu, AGpuNodeJoinsARunningCpuClusterTakesPartAndLeavesWithNoRoundLost) {
  ATOLL_SKIP_WITHOUT_GPU();
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  subprocess head(testing::mlp_head(head_dir, 16000, {"--metrics", metrics, "--set", "storage.keep_rounds=100"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 2, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 2)) << head.output();

  subprocess gpu({ATOLL_BIN, "join", "--head", ep, "--devices", "cuda:0"}, dir.sub("gpu.log"));
  // It takes part: the coordinator's round reports list worker/3.0 (node 3, the third to join).
  ASSERT_TRUE(testing::eventually([&] { return testing::rounds_with(metrics, "worker/3.0") >= 2; }, 90s, 100ms))
      << gpu.output() << head.output();
  auto [code, out] = testing::run_command({ATOLL_BIN, "leave", "3", "--head", ep}, dir.sub("leave.log"));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(gpu.wait(30s), 0) << gpu.output();

  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
  const json fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_EQ(final_round, 40);
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 2) << fragments.dump();
  testing::expect_every_round_kept(ep, final_round);
  for (const auto& m : ask(ep, "members")) {
    if (m["node_id"] != 3) continue;
    EXPECT_EQ(m["state"], "left") << m.dump();
  }
  testing::shut_down(ep, head);
}

}  // namespace
}  // namespace atl
