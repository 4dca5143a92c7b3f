// Heads that fail over (`atoll up --registry etcd://...`, head/head_failover.cpp)
// against a real three-member etcd on loopback: two heads, nodes given both addresses.
// The leading head is SIGKILLed mid-run; the standby takes over from the registry in
// etcd, the nodes follow it, no committed round is lost and every worker agrees with the
// keepers (S1, S3, L1 in docs/reliability.md); the old head, back on an empty disk,
// stands by.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include <unistd.h>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "runtime/transport/control_client.hpp"
#include "tests/support/cluster_helpers.hpp"
#include "tests/support/etcd_cluster.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::subprocess;

class HeadFailover : public testing::EtcdCluster {
 protected:
  // `atoll up` with run dir DIR/`name` on its own port, the registry in etcd; logs to DIR/`log`.log.
  std::unique_ptr<subprocess> start_head(const std::string& name, const std::string& endpoint, long steps,
                                         const std::string& log = "", const std::vector<std::string>& more = {}) {
    auto args = head_args(name, endpoint, steps);
    args.insert(args.end(), more.begin(), more.end());
    return std::make_unique<subprocess>(args, dir_.sub((log.empty() ? name : log) + ".log"));
  }
  std::vector<std::string> head_args(const std::string& name, const std::string& endpoint, long steps) {
    auto args = testing::mlp_head(
        dir_.sub(name), steps,
        {"--registry", registry(), "--election-ttl", "2", "--set", "cluster.heartbeat_ms=300", "--set",
         "cluster.lease_ms=3000", "--set", "storage.keep_rounds=100", "--set", "storage.keepers=nodes"});
    args[3] = endpoint;  // mlp_head's --listen: a fixed port, which the nodes are given
    return args;
  }
  // --registry: the members as etcd://'s HOST:PORT list, and this run's name.
  std::string registry() const {
    std::string hosts = endpoints();
    for (std::string::size_type at; (at = hosts.find("http://")) != std::string::npos;) hosts.erase(at, 7);
    return "etcd://" + hosts + "/failover";
  }
  static std::string endpoint_file(const std::string& run_dir) {
    std::ifstream in(run_dir + "/head.endpoint");
    std::string ep;
    std::getline(in, ep);
    return ep;
  }
};

TEST_F(HeadFailover, ALeadingHeadKilledWithItsDiskIsReplacedByTheStandbyAndNoRoundIsLost) {
  const std::string ep_a = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string ep_b = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string both = ep_a + "," + ep_b;
  const int http_a = testing::free_port(), http_b = testing::free_port();
  auto a = start_head("a", ep_a, 16000, "", {"--http", "tcp://127.0.0.1:" + std::to_string(http_a)});
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("a"), *a), ep_a) << a->output();
  auto b = start_head("b", ep_b, 16000, "", {"--http", "tcp://127.0.0.1:" + std::to_string(http_b)});
  ASSERT_TRUE(testing::eventually([&] { return b->output().find("standing by") != std::string::npos; }, 10s, 50ms))
      << b->output();
  EXPECT_TRUE(endpoint_file(dir_.sub("b")).empty()) << "a standby does not listen";
  // The standby's dashboard sends the browser to the leader's.
  httplib::Client standby_http("127.0.0.1", http_b);
  // Its probes: alive, not ready (the Service routes to the leader alone); the leader ready.
  httplib::Client leader_http("127.0.0.1", http_a);
  auto standby_live = standby_http.Get("/livez"), standby_ready = standby_http.Get("/readyz");
  auto leader_ready = leader_http.Get("/readyz");
  ASSERT_TRUE(standby_live && standby_ready && leader_ready);
  EXPECT_EQ(standby_live->status, 200) << standby_live->body;
  EXPECT_EQ(standby_ready->status, 503) << standby_ready->body;
  EXPECT_EQ(leader_ready->status, 200) << leader_ready->body;
  std::string location;
  ASSERT_TRUE(testing::eventually(
      [&] {
        auto res = standby_http.Get("/api/status");
        location = res && res->status == 307 ? res->get_header_value("Location") : "";
        return !location.empty();
      },
      10s, 100ms));
  EXPECT_EQ(location, "http://127.0.0.1:" + std::to_string(http_a) + "/api/status");
  auto hostile = standby_http.Get("/api/x%0D%0ASet-Cookie:%20a=b");
  ASSERT_TRUE(hostile);
  EXPECT_NE(hostile->status, 307) << "no header split through a redirect";
  EXPECT_FALSE(hostile->has_header("Set-Cookie"));
  auto tab = standby_http.Get("/api/x%09y");
  ASSERT_TRUE(tab);
  EXPECT_EQ(tab->status, 400) << "a control character in the path is refused";

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
  // The dashboard binds the port the standby's redirects held just after the head's
  // endpoint is written: it may take a moment.
  int served = 0;
  std::string body;
  ASSERT_TRUE(testing::eventually(
      [&] {
        auto res = standby_http.Get("/api/status");
        if (res) std::tie(served, body) = std::make_pair(res->status, res->body);
        return static_cast<bool>(res);
      },
      5s, 50ms));
  EXPECT_EQ(served, 200) << "the new leader serves its dashboard itself: " << body;

  // The old head's machine is lost with its disk: nothing the run needs was only there. Its
  // replacement, on an empty run dir, stands by: never a second leader.
  std::filesystem::remove_all(dir_.sub("a"));
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
  testing::expect_every_round_on_two_replicas(ATOLL_BIN, dir_, 40, "", {"--registry", registry()});
  EXPECT_TRUE(endpoint_file(dir_.sub("a")).empty()) << "the restarted head never listened";
  EXPECT_EQ(a->output().find("leading the run"), std::string::npos) << a->output();
  testing::shut_down(ep_b, *b);
  a->signal(SIGTERM);
  EXPECT_EQ(a->wait(10s), 0) << a->output();
}

// One etcd member lost changes nothing; two leave no quorum: the leader cannot renew its
// lead, stops directing and stands by, no head leads, and the nodes train on with their
// coordinators and keepers; once a member is back, a head leads again and the run
// finishes with every round (S1, L1).
TEST_F(HeadFailover, WithoutAnEtcdQuorumNoHeadDirectsAndTheRunResumesWhenEtcdDoes) {
  const std::string ep_a = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string ep_b = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string both = ep_a + "," + ep_b;
  auto a = start_head("a", ep_a, 16000);
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("a"), *a), ep_a) << a->output();
  auto b = start_head("b", ep_b, 16000);
  auto nodes = testing::join_nodes(ATOLL_BIN, both, 2, dir_, true);
  ASSERT_TRUE(testing::wait_for_round(both, 3)) << a->output();

  kill(0);
  const int round = testing::round_of(ep_a);
  ASSERT_TRUE(testing::wait_for_round(ep_a, round + 3)) << "one member down: the leader directs on\n" << a->output();
  EXPECT_EQ(a->output().find("lost the lead"), std::string::npos) << a->output();

  kill(1);
  ASSERT_TRUE(testing::eventually([&] { return a->output().find("lost the lead") != std::string::npos; }, 10s, 50ms))
      << a->output();
  std::this_thread::sleep_for(3s);  // past the ttl: nobody can lead
  EXPECT_TRUE(testing::ask(both, "status").is_null()) << "no head answers without a quorum";
  EXPECT_EQ(b->output().find("leading the run"), std::string::npos) << b->output();
  for (auto& n : nodes) EXPECT_TRUE(n->running()) << "the nodes wait out etcd: " << n->output();

  start(1, "existing");
  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << a->output() << b->output();
  const json status = testing::ask(both, "status");
  EXPECT_EQ(status["state"], "finished") << status.dump();
  const json fragments = testing::ask(both, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40) << "16000 steps / 400: every round, none lost";
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 2) << fragments.dump();
  testing::expect_every_round_on_two_replicas(ATOLL_BIN, dir_, 40, "", {"--registry", registry()});
  for (auto* head : {a.get(), b.get()}) head->signal(SIGTERM);
  for (auto* head : {a.get(), b.get()}) EXPECT_EQ(head->wait(10s), 0) << head->output();
}

// The leading head in a network namespace of its own, joined to this machine by a veth
// pair, so that it can be cut off (its link set down) while it stays up. etcd's clients
// and the nodes reach each other over the veth's host side; the standby runs here.
class PartitionedHeadFailover : public HeadFailover {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace (ip netns)";
    namespace_ = "atoll-p" + std::to_string(::getpid());
    veth_ = "ap" + std::to_string(::getpid());
    if (ip({"netns", "add", namespace_}) != 0) GTEST_SKIP() << "ip netns add failed: no network namespaces here";
    made_namespace_ = true;
    ASSERT_EQ(ip({"link", "add", veth_, "type", "veth", "peer", "name", "eth0", "netns", namespace_}), 0);
    ASSERT_EQ(ip({"addr", "add", host_address + std::string("/24"), "dev", veth_}), 0);
    ASSERT_EQ(ip({"link", "set", veth_, "up"}), 0);
    ASSERT_EQ(in_namespace({"ip", "addr", "add", head_address + std::string("/24"), "dev", "eth0"}), 0);
    ASSERT_EQ(in_namespace({"ip", "link", "set", "eth0", "up"}), 0);
    ASSERT_EQ(in_namespace({"ip", "link", "set", "lo", "up"}), 0);
    client_host_ = host_address;  // etcd's clients: the standby here, the leader over the veth
    HeadFailover::SetUp();
  }
  void TearDown() override {
    if (made_namespace_) (void)ip({"netns", "del", namespace_});  // takes the veth pair with it
  }
  int ip(const std::vector<std::string>& args) {
    std::vector<std::string> all = {ip_binary};
    all.insert(all.end(), args.begin(), args.end());
    return testing::run_command(all, dir_.sub("ip.log")).first;
  }
  int in_namespace(const std::vector<std::string>& command) {
    std::vector<std::string> args = {"netns", "exec", namespace_};
    args.insert(args.end(), command.begin(), command.end());
    return ip(args);
  }
  // start_head, inside the namespace.
  std::unique_ptr<subprocess> start_head_inside(const std::string& name, const std::string& endpoint, long steps) {
    auto args = head_args(name, endpoint, steps);
    args.push_back("--insecure");  // plain TCP on the veth, a link of this machine's own
    args.insert(args.begin(), {ip_binary, "netns", "exec", namespace_});
    return std::make_unique<subprocess>(args, dir_.sub(name + ".log"));
  }

  static constexpr const char* ip_binary = "/usr/sbin/ip";  // iproute2 (subprocess does not search PATH)
  static constexpr const char* host_address = "10.79.0.1";
  static constexpr const char* head_address = "10.79.0.2";
  std::string namespace_, veth_;
  bool made_namespace_ = false;
};

// Partition the leading head from etcd and the nodes while it stays up: it cannot renew
// its lead and stops directing; the standby takes over; the nodes drop their silent
// connection to the old leader (pings) and follow the new one; after the heal the old
// leader stands by, one leader, and the run ends with every round.
TEST_F(PartitionedHeadFailover, ALeaderCutOffWhileUpIsReplacedAndStandsByAfterTheHeal) {
  const std::string ep_a = std::string("tcp://") + head_address + ":" + std::to_string(testing::free_port());
  const std::string ep_b = "tcp://127.0.0.1:" + std::to_string(testing::free_port());
  const std::string both = ep_a + "," + ep_b;
  auto a = start_head_inside("a", ep_a, 16000);
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("a"), *a), ep_a) << a->output();
  auto b = start_head("b", ep_b, 16000);
  auto nodes = testing::join_nodes(ATOLL_BIN, both, 2, dir_, true, {"--insecure"});
  ASSERT_TRUE(testing::wait_for_round(both, 3)) << a->output();
  const int epoch_before = testing::ask(both, "status")["epoch"];

  ASSERT_EQ(in_namespace({"ip", "link", "set", "eth0", "down"}), 0);
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_EQ(testing::wait_for_endpoint(dir_.sub("b"), *b), ep_b) << b->output();
  const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - cut);
  EXPECT_LT(took, 2s + 5s) << "the standby leads within 5 s of the cut-off leader's lease (2 s)";
  std::cout << "standby listening " << took.count() << " ms after the leader was cut off\n";
  EXPECT_TRUE(testing::eventually([&] { return a->output().find("lost the lead") != std::string::npos; }, 5s, 50ms))
      << "the cut-off leader stops directing by itself: " << a->output();
  const int round = testing::round_of(ep_b);
  EXPECT_TRUE(testing::wait_for_round(ep_b, round + 2)) << "the run goes on under the new leader";

  ASSERT_EQ(in_namespace({"ip", "link", "set", "eth0", "up"}), 0);
  EXPECT_TRUE(testing::eventually(
      [&] { return a->output().find("standing by; leading: " + ep_b) != std::string::npos; }, 10s, 100ms))
      << "after the heal the old leader learns who leads and stands by: " << a->output();
  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << b->output();
  const auto log = a->output();
  EXPECT_EQ(log.find("leading the run", log.find("leading the run") + 1), std::string::npos)
      << "the old leader never led again: " << log;
  const json status = testing::ask(ep_b, "status");
  EXPECT_EQ(status["state"], "finished") << status.dump();
  EXPECT_GT(status["epoch"].get<int>(), epoch_before);
  const json fragments = testing::ask(ep_b, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40) << "16000 steps / 400: every round, none lost";
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 2) << fragments.dump();
  testing::expect_every_round_on_two_replicas(ATOLL_BIN, dir_, 40, "", {"--registry", registry()});
  EXPECT_FALSE(control_request(ep_a, "status", "", 1000ms)) << "one leader: the old one does not listen";
  testing::shut_down(ep_b, *b);
  a->signal(SIGTERM);
  EXPECT_EQ(a->wait(10s), 0) << a->output();
}

}  // namespace
}  // namespace atl
