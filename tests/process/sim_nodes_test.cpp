// Process tier: many simulated nodes (tools/sim_nodes: the real node agent and worker over
// their own connections, a stand-in model) against a real head, through kills, leaves and
// joins. Every node's route table comes as deltas (runtime/transport/route_delta.hpp); once
// the churn stops, every healthy node must hold the same table, and it must list exactly
// the nodes the head has as members that host anything.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;
using testing::subprocess;

// The JSON lines atoll_sim_nodes printed, by event.
std::map<std::string, std::vector<json>> events_of(const std::string& output) {
  std::map<std::string, std::vector<json>> by_event;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '{') continue;  // the nodes' log lines
    const auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("event")) by_event[j["event"]].push_back(j);
  }
  return by_event;
}

TEST(SimulatedNodes, TwoHundredNodesThroughKillsLeavesAndJoinsEndHoldingTheHeadsTable) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(testing::mlp_head(head_dir, 1000000000,
                                    {"--set", "storage.keepers=head", "--set", "cluster.lease_ms=5000", "--set",
                                     "cluster.heartbeat_ms=500"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  // 200 nodes; from 4 s on, for 8 s, a kill and a leave every second and two joins; then
  // 8 s of quiet (more than a heartbeat, less than a lease) before the tables are read.
  subprocess sims({ATOLL_SIM_BIN, "--head", ep, "--nodes", "200", "--seconds", "20", "--churn-after", "4",
                   "--churn-for", "8", "--kills", "1", "--leaves", "1", "--joins", "2"},
                  dir.sub("sims.log"));
  ASSERT_EQ(sims.wait(60s), 0) << sims.output();
  const auto events = events_of(sims.output());
  ASSERT_EQ(events.count("agreement"), 1u) << sims.output();
  const auto agreement = events.at("agreement").back();

  EXPECT_GE(events.count("kill") ? events.at("kill").size() : 0u, 6u) << "the churn ran";
  EXPECT_GE(events.count("leave") ? events.at("leave").size() : 0u, 6u);
  ASSERT_TRUE(events.count("joined"));
  EXPECT_GE(events.at("joined").size(), 212u) << "the 200, and the joiners";
  for (const auto& kind : {"kill", "leave"})
    for (const auto& e : events.count(kind) ? events.at(kind) : std::vector<json>{})
      EXPECT_LT(e["s"].get<double>(), 3.0) << kind << " of node " << e["node"] << " reached the tables late";

  EXPECT_EQ(agreement["distinct_tables"], 1) << "healthy nodes hold different tables: " << agreement.dump();
  // The head's members that host anything are in the table (joining, syncing, active).
  std::size_t hosting = 0;
  for (const auto& m : testing::ask(ep, "members")) {
    const auto state = m["state"].get<std::string>();
    if (state == "joining" || state == "syncing" || state == "active") hosting++;
  }
  EXPECT_EQ(agreement["listed"].get<std::size_t>(), hosting) << agreement.dump();
  EXPECT_EQ(agreement["holders"].get<std::size_t>(), hosting) << "every healthy node is a member, and no other";
  testing::shut_down(ep, head);
}

// A real head against a thousand simulated nodes for a minute, steady and then under churn
// (kills, silences, leaves and as many joins, two losses a second), with rounds of a thousand
// participants every 10 s: the size at which the head used to die (issue 67: a RoundReport
// read past its reader's budget ended the registry). The head stays up, `status` answers
// within a second each time it is asked, rounds commit, and no actor died or had a handler
// fail. The figures themselves are the scale bench's (`./tools/dev bench scale`).
TEST(SimulatedNodes, AThousandNodesSteadyThenChurningKeepTheHeadUpAndItsStatusWithinASecond) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  const std::string metrics = dir.sub("metrics.jsonl");
  subprocess head(
      testing::mlp_head(head_dir, 1000000000,
                        {"--set", "storage.keepers=head", "--set", "cluster.lease_ms=10000", "--set",
                         "cluster.heartbeat_ms=1000", "--set", "diloco.sync_every=50", "--metrics", metrics}),
      dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  // Four processes of 250 nodes (as the bench packs them); churn from 30 s to the end.
  std::vector<std::unique_ptr<subprocess>> sims;
  for (int i = 0; i < 4; ++i)
    sims.push_back(std::make_unique<subprocess>(std::vector<std::string>{ATOLL_SIM_BIN,
                                                                         "--head",
                                                                         ep,
                                                                         "--nodes",
                                                                         "250",
                                                                         "--values",
                                                                         "64",
                                                                         "--seconds",
                                                                         "62",
                                                                         "--churn-after",
                                                                         "30",
                                                                         "--kills",
                                                                         "0.225",
                                                                         "--leaves",
                                                                         "0.225",
                                                                         "--silences",
                                                                         "0.05",
                                                                         "--joins",
                                                                         "0.5",
                                                                         "--seed",
                                                                         std::to_string(i + 1)},
                                                dir.sub("sims" + std::to_string(i) + ".log")));
  const auto started = std::chrono::steady_clock::now();
  double slowest_status_s = 0;
  int asked = 0;
  while (std::chrono::steady_clock::now() - started < 60s) {
    std::this_thread::sleep_for(5s);
    ASSERT_TRUE(head.running()) << "the head died: " << head.output();
    const auto t0 = std::chrono::steady_clock::now();
    const auto status = testing::ask(ep, "status");
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    ASSERT_TRUE(status.is_object()) << "status did not answer after " << asked << " answers";
    slowest_status_s = std::max(slowest_status_s, took);
    asked++;
  }
  for (auto& s : sims) EXPECT_EQ(s->wait(60s), 0) << s->output();
  ASSERT_TRUE(head.running()) << "the head died: " << head.output();
  EXPECT_LE(slowest_status_s, 1.0) << "the slowest of " << asked << " status answers";
  const auto status = testing::ask(ep, "status");
  ASSERT_TRUE(status.is_object());
  EXPECT_GE(status["members_total"].get<std::size_t>(), 1000u);
  EXPECT_LE(status["members"].size(), 256u) << "the status reply lists at most views::status_rows";
  EXPECT_EQ(status["refused"]["head"].value("handler_failed", 0), 0) << status["refused"].dump();
  std::size_t rounds = 0;
  std::ifstream lines(metrics);
  for (std::string line; std::getline(lines, line);)
    rounds += json::parse(line, nullptr, false).value("type", "") == "round";
  EXPECT_GT(rounds, 0u) << "no round committed";
  const std::string log = head.output();
  const auto line_at = [&](std::size_t at) { return log.substr(log.rfind('\n', at) + 1, 400); };
  const auto died = log.find("unhandled exception"), failed = log.find("the actor goes on");
  EXPECT_EQ(died, std::string::npos) << "an actor died: " << line_at(died);
  EXPECT_EQ(failed, std::string::npos) << "a handler failed: " << line_at(failed);
  testing::shut_down(ep, head);
}

}  // namespace
}  // namespace atl
