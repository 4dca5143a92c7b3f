// The etcd client and the head election against a real three-member etcd cluster on
// loopback (Debian's etcd-server, started and stopped here): reads and writes, leases
// that expire and take their keys, an election whose leader is lost and replaced with a
// greater term, and one member down changing nothing while two down leave no quorum.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <memory>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/etcd_client.hpp"
#include "runtime/head_election.hpp"
#include "tests/eventually.hpp"
#include "tests/subprocess.hpp"
#include "tests/test_dir.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
constexpr const char* etcd_binary = "/usr/bin/etcd";

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Three etcd members on loopback, each its own process and data dir.
class EtcdCluster : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(etcd_binary)) GTEST_SKIP() << "no " << etcd_binary << " (apt install etcd-server)";
    std::string initial;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      members_[i].client = "http://127.0.0.1:" + std::to_string(free_port());
      members_[i].peer = "http://127.0.0.1:" + std::to_string(free_port());
      initial += (i ? "," : "") + name(i) + "=" + members_[i].peer;
    }
    initial_cluster_ = initial;
    for (std::size_t i = 0; i < members_.size(); ++i) start(i, "new");
    etcd_client etcd(endpoints());
    ASSERT_TRUE(testing::eventually([&] { return !etcd.put("/ready", "1"); }, 30s, 100ms))
        << members_[0].process->output();
  }

  static std::string name(std::size_t i) { return "m" + std::to_string(i); }

  void start(std::size_t i, const std::string& state) {
    auto& m = members_[i];
    m.process = std::make_unique<testing::subprocess>(std::vector<std::string>{etcd_binary,
                                                                               "--name",
                                                                               name(i),
                                                                               "--data-dir",
                                                                               dir_.sub(name(i)),
                                                                               "--listen-client-urls",
                                                                               m.client,
                                                                               "--advertise-client-urls",
                                                                               m.client,
                                                                               "--listen-peer-urls",
                                                                               m.peer,
                                                                               "--initial-advertise-peer-urls",
                                                                               m.peer,
                                                                               "--initial-cluster",
                                                                               initial_cluster_,
                                                                               "--initial-cluster-state",
                                                                               state,
                                                                               "--initial-cluster-token",
                                                                               "atoll-test",
                                                                               "--heartbeat-interval",
                                                                               "50",
                                                                               "--election-timeout",
                                                                               "500"},
                                                      dir_.sub(name(i) + ".log"));
  }
  void kill(std::size_t i) {
    members_[i].process->signal(SIGKILL);
    members_[i].process->wait(5s);
  }

  std::string endpoints() const {
    std::string list;
    for (const auto& m : members_) list += (list.empty() ? "" : ",") + m.client;
    return list;
  }

  struct member {
    std::string client, peer;
    std::unique_ptr<testing::subprocess> process;
  };
  testing::temp_dir dir_;
  std::array<member, 3> members_;
  std::string initial_cluster_;
};

TEST_F(EtcdCluster, ReadsWritesAndCreatesAKeyOnlyOnce) {
  etcd_client etcd(endpoints());
  const std::string bytes("a\0b\xff", 4);
  ASSERT_FALSE(etcd.put("/atoll/c/config", bytes));
  auto got = etcd.get("/atoll/c/config");
  ASSERT_TRUE(got && *got);
  EXPECT_EQ((*got)->value, bytes);
  EXPECT_GT((*got)->mod_revision, 0);
  auto absent = etcd.get("/atoll/c/none");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent);

  auto first = etcd.create_if_absent("/atoll/c/leader", "tcp://a:7070", 0);
  auto second = etcd.create_if_absent("/atoll/c/leader", "tcp://b:7070", 0);
  ASSERT_TRUE(first && second);
  EXPECT_TRUE(first->created);
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->holder.value, "tcp://a:7070");
  EXPECT_EQ(second->holder.create_revision, first->holder.create_revision);
  ASSERT_FALSE(etcd.erase("/atoll/c/leader"));
  EXPECT_FALSE(*etcd.get("/atoll/c/leader"));
}

TEST_F(EtcdCluster, AKeyGoesWithItsLeaseRevokedOrExpired) {
  etcd_client etcd(endpoints());
  auto lease = etcd.grant_lease(2s);
  ASSERT_TRUE(lease) << lease.err().describe();
  ASSERT_FALSE(etcd.put("/atoll/c/held", "x", *lease));
  auto left = etcd.keep_alive(*lease);
  ASSERT_TRUE(left) << left.err().describe();
  EXPECT_GE(left->count(), 1);
  ASSERT_FALSE(etcd.revoke(*lease));
  EXPECT_FALSE(*etcd.get("/atoll/c/held"));

  auto short_lease = etcd.grant_lease(1s);
  ASSERT_TRUE(short_lease);
  ASSERT_FALSE(etcd.put("/atoll/c/expiring", "y", *short_lease));
  EXPECT_TRUE(testing::eventually([&] { return !*etcd.get("/atoll/c/expiring"); }, 10s, 100ms))
      << "the key outlived its lease";
  auto expired = etcd.keep_alive(*short_lease);
  ASSERT_FALSE(expired);
  EXPECT_EQ(expired.err().code, errc::not_ready);
}

TEST_F(EtcdCluster, ALostLeaderIsReplacedByAStandbyWithAGreaterTerm) {
  etcd_client etcd_a(endpoints()), etcd_b(endpoints());
  head_election a(etcd_a, "/atoll/c/leader", "tcp://a:7070", 2s);
  head_election b(etcd_b, "/atoll/c/leader", "tcp://b:7070", 2s);
  auto first = a.campaign();
  ASSERT_TRUE(first) << first.err().describe();
  EXPECT_TRUE(first->leading);
  auto standby = b.campaign();
  ASSERT_TRUE(standby);
  EXPECT_FALSE(standby->leading);
  EXPECT_EQ(standby->leader, "tcp://a:7070");
  EXPECT_EQ(standby->term, first->term);
  auto again = a.campaign();  // a leader that campaigns again still leads, same term
  ASSERT_TRUE(again);
  EXPECT_TRUE(again->leading);
  EXPECT_EQ(again->term, first->term);

  // a stops renewing (it died, or lost etcd): its lease runs out and b takes over.
  election_outcome next;
  ASSERT_TRUE(testing::eventually(
      [&] {
        auto o = b.campaign();
        if (o) next = *o;
        return o && o->leading;
      },
      10s, 200ms));
  EXPECT_EQ(next.leader, "tcp://b:7070");
  EXPECT_GT(next.term, first->term) << "a later leader's term is greater: the deposed one is fenced by it";
  const auto deposed = a.renew();
  EXPECT_EQ(deposed.code, errc::not_ready) << "the old leader learns it lost the lead";
  auto lost = a.campaign();
  ASSERT_TRUE(lost);
  EXPECT_FALSE(lost->leading) << "the old leader, back, stands by: never a second leader";
  ASSERT_FALSE(b.resign());
  auto after = a.campaign();
  ASSERT_TRUE(after);
  EXPECT_TRUE(after->leading);
  EXPECT_GT(after->term, next.term);
}

TEST_F(EtcdCluster, OneMemberDownChangesNothingTwoDownLeaveNoQuorumUntilOneIsBack) {
  etcd_client etcd(endpoints(), 1000ms);
  ASSERT_FALSE(etcd.put("/atoll/c/k", "1"));
  kill(0);
  ASSERT_FALSE(etcd.put("/atoll/c/k", "2")) << "two of three members are a quorum";
  EXPECT_EQ((*etcd.get("/atoll/c/k"))->value, "2");
  kill(1);
  const auto refused = etcd.put("/atoll/c/k", "3");
  ASSERT_TRUE(refused) << "one member of three has no quorum";
  EXPECT_TRUE(refused.code == errc::not_ready || refused.code == errc::timeout) << refused.describe();
  start(1, "existing");
  EXPECT_TRUE(testing::eventually([&] { return !etcd.put("/atoll/c/k", "4"); }, 30s, 200ms))
      << "the cluster takes writes again once a quorum is back";
  EXPECT_EQ((*etcd.get("/atoll/c/k"))->value, "4");
}

}  // namespace
}  // namespace atl
