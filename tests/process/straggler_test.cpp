// Process tier, stragglers (issue 46): a node throttled to about a quarter of its speed
// (SIGSTOP 45 ms, SIGCONT 15 ms, over and over: the documented throttle of these tests).
// - diloco.round_close = adaptive: rounds close without it once the other two are in and
//   their grace passed, so the run goes on at the fast nodes' pace; the throttled node
//   resyncs to the rounds it missed and finishes once released.
// - diloco.sync_every_s: every worker contributes at the same time, the throttled one with
//   fewer inner steps and a smaller weight; it is in every round and never resyncs.
// Either way every worker at the final round holds the keeper's digest (S1), and every
// round is kept in order (S3).
#include <atomic>
#include <fstream>
#include <regex>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::ask;
using testing::subprocess;
using namespace std::chrono_literals;

// Stops and continues a process on a duty cycle until destroyed (then leaves it running).
class throttle {
 public:
  throttle(subprocess& p, std::chrono::milliseconds stopped, std::chrono::milliseconds running)
      : thread_([this, &p, stopped, running] {
          while (!done_) {
            p.signal(SIGSTOP);
            std::this_thread::sleep_for(stopped);
            p.signal(SIGCONT);
            std::this_thread::sleep_for(running);
          }
        }) {}
  ~throttle() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

// The node to slow: one that hosts no coordinator; and its worker's id.
std::pair<subprocess*, std::string> node_to_slow(const std::string& ep,
                                                 const std::vector<std::unique_ptr<subprocess>>& nodes) {
  const std::string coordinator = testing::coordinator_host(ep);
  std::string slow_node;
  for (const auto& m : ask(ep, "members")) {
    const std::string node = "node/" + std::to_string(m["node_id"].get<int>());
    if (node != coordinator) slow_node = node;
  }
  if (slow_node.empty()) return {nullptr, ""};
  return {testing::process_of(ep, slow_node, nodes), "worker/" + slow_node.substr(5) + ".0"};
}

TEST(Stragglers, AThrottledNodeIsNotWaitedForUnderAnAdaptiveCloseAndStillAgrees) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  // The keeper on the head: the throttled node holds no commit up. A lease long enough
  // for a stopped node not to be declared dead.
  subprocess head(testing::mlp_head(
                      head_dir, 12000,
                      {"--metrics", metrics, "--set", "diloco.round_close=adaptive", "--set", "diloco.grace_min_ms=100",
                       "--set", "storage.keepers=head", "--set", "storage.keep_rounds=100"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 2)) << head.output();

  const auto [slow, slow_worker] = node_to_slow(ep, nodes);
  ASSERT_NE(slow, nullptr);
  const int throttled_at = testing::round_of(ep);
  {
    throttle quarter_speed(*slow, 45ms, 15ms);
    // The other two finish at their own pace, not the throttled node's.
    for (auto& n : nodes) {
      if (n.get() == slow) continue;
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  }
  EXPECT_EQ(slow->wait(120s), 0) << slow->output() << head.output();

  const json fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 3) << fragments.dump();
  testing::expect_every_round_kept(ep, final_round);
  // Rounds closed without the throttled worker, by the adaptive grace.
  const int with_slow = testing::rounds_with(metrics, slow_worker);
  EXPECT_LT(with_slow, final_round - 2) << slow_worker << " took part in " << with_slow << " of " << final_round
                                        << " rounds (throttled from round " << throttled_at << ")";
  std::string logs = head.output();
  for (const auto& n : nodes) logs += n->output();
  EXPECT_NE(logs.find("adaptive grace passed"), std::string::npos) << logs;
  testing::shut_down(ep, head);
}

// Each round's weight of `worker` in a metrics file, in round order (0: not in the round).
std::vector<double> weights_of(const std::string& metrics, const std::string& worker) {
  std::vector<double> out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "round") continue;
    double w = 0;
    for (std::size_t i = 0; i < j["workers"].size(); ++i)
      if (j["workers"][i] == worker) w = j["weights"][i];
    out.push_back(w);
  }
  return out;
}

TEST(Stragglers, InTimeBoxedPhasesAThrottledNodeIsInEveryRoundWithASmallerWeight) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  // A round every second of training (ticks of 50 ms), 240 ticks: 12 rounds.
  subprocess head(testing::mlp_head(
                      head_dir, 240,
                      {"--metrics", metrics, "--set", "diloco.sync_every_s=1", "--set", "diloco.sync_every=20", "--set",
                       "storage.keepers=head", "--set", "storage.keep_rounds=100", "--set", "run.min_workers=3"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 1)) << head.output();
  const auto [slow, slow_worker] = node_to_slow(ep, nodes);
  ASSERT_NE(slow, nullptr);
  const int throttled_after = testing::round_of(ep);
  {
    throttle quarter_speed(*slow, 45ms, 15ms);
    for (auto& n : nodes) {
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  }
  const json fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_EQ(final_round, 12) << "a round every 20 ticks of 240";
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 3) << fragments.dump();
  testing::expect_every_round_kept(ep, final_round);
  EXPECT_EQ(testing::rounds_with(metrics, slow_worker), final_round) << "the throttled worker missed rounds";
  // Once throttled, its weight (samples trained since its last sync) is below each other's.
  const auto slow_weights = weights_of(metrics, slow_worker);
  int lighter = 0;
  for (int r = throttled_after + 2; r < final_round; ++r) {
    for (const auto& n : nodes) {
      const std::string other = "worker/" + std::to_string(&n - &nodes[0] + 1) + ".0";
      if (other == slow_worker) continue;
      lighter += slow_weights.at(r - 1) < weights_of(metrics, other).at(r - 1) ? 1 : 0;  // round r at r - 1
    }
  }
  const int compared = 2 * (final_round - throttled_after - 2);
  EXPECT_GE(lighter, compared - 1) << "the throttled worker did not weigh less in " << compared - lighter << " of "
                                   << compared << " comparisons";
  // It merged every result: no committed state adopted after the seed, nothing refused.
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("type", "") != "adopted" || j.value("worker", "") != slow_worker) continue;
    EXPECT_EQ(j.value("round", -1), 0) << "the throttled worker resynced: " << line;
  }
  EXPECT_EQ(slow->output().find("refused by"), std::string::npos) << slow->output();
  testing::shut_down(ep, head);
}

}  // namespace
}  // namespace atl
