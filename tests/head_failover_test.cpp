// Heads that fail over (`atoll up --registry etcd://...`, tools/atoll/head_failover.cpp)
// against a real three-member etcd on loopback: two heads, nodes given both addresses.
// The leading head is SIGKILLed mid-run; the standby takes over from the registry in
// etcd, the nodes follow it, no committed round is lost and every worker agrees with the
// keepers (S1, S3, L1 in docs/reliability.md); the old head, back, stands by.
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "runtime/control_client.hpp"
#include "tests/cluster_helpers.hpp"
#include "tests/etcd_cluster.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::subprocess;

class HeadFailover : public testing::EtcdCluster {
 protected:
  // `atoll up` with run dir DIR/`name` on its own port, the registry in etcd; logs to DIR/`log`.log.
  std::unique_ptr<subprocess> start_head(const std::string& name, const std::string& endpoint, long steps,
                                         const std::string& log = "") {
    auto args = testing::mlp_head(dir_.sub(name), steps,
                                  {"--registry", "etcd://" + etcd_hosts() + "/failover", "--election-ttl", "2", "--set",
                                   "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=3000", "--set",
                                   "storage.keep_rounds=100", "--set", "storage.keepers=nodes"});
    args[3] = endpoint;  // mlp_head's --listen: a fixed port, which the nodes are given
    return std::make_unique<subprocess>(args, dir_.sub((log.empty() ? name : log) + ".log"));
  }
  // The members as etcd://'s HOST:PORT list.
  std::string etcd_hosts() const {
    std::string hosts = endpoints();
    for (std::string::size_type at; (at = hosts.find("http://")) != std::string::npos;) hosts.erase(at, 7);
    return hosts;
  }
  static std::string endpoint_file(const std::string& run_dir) {
    std::ifstream in(run_dir + "/head.endpoint");
    std::string ep;
    std::getline(in, ep);
    return ep;
  }
};

TEST_F(HeadFailover, AKilledLeadingHeadIsReplacedByTheStandbyAndNoRoundIsLost) {
  const std::string ep_a = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string ep_b = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string both = ep_a + "," + ep_b;
  auto a = start_head("a", ep_a, 16000);
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("a"), *a), ep_a) << a->output();
  auto b = start_head("b", ep_b, 16000);
  ASSERT_TRUE(testing::eventually([&] { return b->output().find("standing by") != std::string::npos; }, 10s, 50ms))
      << b->output();
  EXPECT_TRUE(endpoint_file(dir_.sub("b")).empty()) << "a standby does not listen";

  auto nodes = testing::join_nodes(ATOLL_BIN, both, 2, dir_, true);
  ASSERT_TRUE(testing::wait_for_round(both, 3)) << a->output();
  const int epoch_before = testing::ask(both, "status")["epoch"];

  a->signal(SIGKILL);
  EXPECT_EQ(a->wait(5s), 128 + SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("b"), *b), ep_b) << b->output();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed);
  EXPECT_LT(took, 2s + 5s) << "the standby leads within 5 s of the lost leader's lease (2 s)";
  std::cout << "standby listening " << took.count() << " ms after the leader was killed\n";

  // The old head, back on its run dir, stands by: never a second leader.
  std::remove((dir_.sub("a") + "/head.endpoint").c_str());
  a = start_head("a", ep_a, 16000, "a2");
  ASSERT_TRUE(testing::eventually([&] { return a->output().find("standing by") != std::string::npos; }, 10s, 50ms))
      << a->output();

  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << b->output();
  const json status = testing::ask(ep_b, "status");
  EXPECT_EQ(status["state"], "finished") << status.dump();
  EXPECT_GT(status["epoch"].get<int>(), epoch_before) << "the new leader's epoch is above the old one's";
  EXPECT_EQ(status["members"].size(), 2u) << "nobody registered twice: " << status["members"].dump();
  const json fragments = testing::ask(ep_b, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40) << "16000 steps / 400: every round, none lost";
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 2) << fragments.dump();
  EXPECT_TRUE(endpoint_file(dir_.sub("a")).empty()) << "the restarted head never listened";
  EXPECT_EQ(a->output().find("leading the run"), std::string::npos) << a->output();
  testing::shut_down(ep_b, *b);
  a->signal(SIGTERM);
  EXPECT_EQ(a->wait(10s), 0) << a->output();
}

}  // namespace
}  // namespace atl
