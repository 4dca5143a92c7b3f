#pragma once
// A real three-member etcd cluster on loopback for process tests (Debian's etcd-server,
// started here and killed with the fixture): the registry of heads that fail over, and
// the etcd client and election beneath it, are tested against the real thing.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/etcd/etcd_client.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/subprocess.hpp"
#include "tests/support/test_dir.hpp"

namespace atl {
namespace testing {

inline constexpr const char* etcd_binary = "/usr/bin/etcd";

inline int free_port() {
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
 public:
  // The members' client URLs, comma-separated: what --registry and etcd_client take.
  std::string endpoints() const {
    std::string list;
    for (const auto& m : members_) list += (list.empty() ? "" : ",") + m.client;
    return list;
  }

 protected:
  void SetUp() override {
    if (!std::filesystem::exists(etcd_binary)) GTEST_SKIP() << "no " << etcd_binary << " (apt install etcd-server)";
    std::string initial;
    for (std::size_t i = 0; i < members_.size(); ++i) {
      members_[i].client = "http://" + client_host_ + ":" + std::to_string(free_port());
      members_[i].peer = "http://127.0.0.1:" + std::to_string(free_port());
      initial += (i ? "," : "") + name(i) + "=" + members_[i].peer;
    }
    initial_cluster_ = initial;
    for (std::size_t i = 0; i < members_.size(); ++i) start(i, "new");
    etcd_client etcd(endpoints());
    ASSERT_TRUE(testing::eventually([&] { return !etcd.put("/ready", "1"); }, std::chrono::seconds(30),
                                    std::chrono::milliseconds(100)))
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
    members_[i].process->wait(std::chrono::seconds(5));
  }

  // Where clients reach the members; a fixture that sets another address sets it before
  // SetUp (and the address must be this machine's).
  std::string client_host_ = "127.0.0.1";
  struct member {
    std::string client, peer;
    std::unique_ptr<testing::subprocess> process;
  };
  testing::temp_dir dir_;
  std::array<member, 3> members_;
  std::string initial_cluster_;
};

}  // namespace testing
}  // namespace atl
