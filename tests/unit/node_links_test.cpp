// runtime/transport/node_links with real sockets on loopback and CURVE: a head and two nodes in one
// process, each with its own directory and key pair.
//  - a message for an actor on a listening peer goes straight there, not through the head;
//  - the head's actors are still reached through the head;
//  - a peer whose route table does not list us yet refuses our handshake, and ZeroMQ never
//    retries that: the link is made again, so delivery resumes once the peer admits us.
#include <atomic>
#include <chrono>

#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "runtime/transport/node_links.hpp"
#include "runtime/transport/security.hpp"
#include "tests/support/counting_actor.hpp"
#include "tests/support/eventually.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using testing::counting_actor;
using testing::eventually;

class NodeLinksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(check_curve_available());
    head_keys_ = *generate_keypair();
    a_keys_ = *generate_keypair();
    b_keys_ = *generate_keypair();
    link_security head;
    head.own = head_keys_;
    head.authorized = {a_keys_.public_key, b_keys_.public_key};
    head_dir_.add("registry", sys_.spawn(counting_actor, &at_head_));
    head_ = std::make_unique<zmq_transport>(zmq_transport::role::server, "tcp://127.0.0.1:0", head_dir_, cluster_,
                                            wire::limits{}, head);
    b_dir_.add("worker/2.0", sys_.spawn(counting_actor, &at_b_));
    a_ = std::make_unique<node_links>(settings(a_keys_), a_dir_, cluster_);
    b_ = std::make_unique<node_links>(settings(b_keys_), b_dir_, cluster_);
  }
  void TearDown() override {
    a_->stop();
    b_->stop();
    head_->stop();
    for (auto* dir : {&head_dir_, &a_dir_, &b_dir_}) {
      for (const auto& id : dir->ids()) caf::anon_send_exit(dir->find(id), caf::exit_reason::user_shutdown);
      dir->clear();
    }
  }
  node_link_settings settings(const curve_keypair& own) const {
    node_link_settings s;
    s.head = head_->bound_endpoint();
    s.listen = "tcp://127.0.0.1:0";
    s.security.own = own;
    s.security.server_public_key = head_keys_.public_key;
    return s;
  }
  route_table table(bool with_a) const {
    route_table t;
    if (with_a) t.nodes[1] = {a_->data_endpoint(), a_keys_.public_key};
    t.nodes[2] = {b_->data_endpoint(), b_keys_.public_key};
    return t;
  }
  void send_from_a(const std::string& sender, const std::string& receiver, bool with_tensor = false) {
    mailer mail(*a_, sender, "c");
    wire::outgoing out;
    out.envelope.initStateRequest().setFragment(0);
    const std::vector<float> values(1024, 1.0f);
    if (with_tensor) out.tensors.push_back(wire::tensor::from_floats(values.data(), values.size()));
    mail.send(receiver, 1, out);
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_{cfg_};
  cluster_identity cluster_{"c"};
  curve_keypair head_keys_, a_keys_, b_keys_;
  directory head_dir_, a_dir_, b_dir_;
  std::atomic<int> at_head_{0}, at_b_{0};
  std::unique_ptr<zmq_transport> head_;
  std::unique_ptr<node_links> a_, b_;
};

TEST_F(NodeLinksTest, TensorsGoStraightToThePeerAndControlThroughTheHead) {
  a_->update_routes(table(true), 1);
  b_->update_routes(table(true), 2);
  send_from_a("worker/1.0", "worker/2.0");
  EXPECT_TRUE(eventually([&] { return at_b_ == 1; }));
  send_from_a("node/1", "registry");
  EXPECT_TRUE(eventually([&] { return at_head_ == 1; }));
  EXPECT_EQ(head_->counters().bytes_relayed.load(), 0u);
}

TEST_F(NodeLinksTest, APeerThatRefusedUsIsConnectedAgainOnceItAdmitsUs) {
  a_->update_routes(table(true), 1);
  b_->update_routes(table(false), 2);  // B's table lags: A's key is not admitted yet
  send_from_a("worker/1.0", "worker/2.0");
  EXPECT_TRUE(eventually([&] { return a_->counters().handshakes_failed.load() > 0; }));
  EXPECT_EQ(at_b_, 0);
  b_->update_routes(table(true), 2);
  // Workers resend what they wait for; so does this test, until one arrives.
  EXPECT_TRUE(eventually(
      [&] {
        send_from_a("worker/1.0", "worker/2.0");
        return at_b_ > 0;
      },
      10s, 200ms));
}

TEST_F(NodeLinksTest, APeersDataEndpointRefusesAnotherNodesIdsFromOurKey) {
  a_->update_routes(table(true), 1);
  b_->update_routes(table(true), 2);
  send_from_a("worker/2.0", "worker/2.0");  // A's key speaking as B's own worker
  EXPECT_TRUE(eventually([&] { return b_->counters().refused[static_cast<int>(errc::sender_conflict)].load() > 0; }));
  EXPECT_EQ(at_b_, 0);
}

// Tensors for a coordinator whose host left A's table (it is being re-placed) wait for the
// next table instead of crossing the head; that table sends them straight to the new host.
TEST_F(NodeLinksTest, TensorsForACoordinatorBeingReplacedWaitForTheTableThatNamesItsNewHost) {
  b_dir_.add("coord/4", sys_.spawn(counting_actor, &at_b_));
  head_dir_.add("coord/4", sys_.spawn(counting_actor, &at_head_));  // counts what takes the head
  auto stale = table(true);
  stale.placed["coord/4"] = 7;  // its old host, gone from the table
  a_->update_routes(stale, 1);
  b_->update_routes(table(true), 2);
  send_from_a("worker/1.0", "coord/4", true);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(at_b_, 0);
  EXPECT_EQ(at_head_, 0) << "the tensors took the head";
  auto fresh = table(true);
  fresh.placed["coord/4"] = 2;
  a_->update_routes(fresh, 1);
  EXPECT_TRUE(eventually([&] { return at_b_ == 1; }));
  EXPECT_EQ(at_head_, 0);
  // Without tensors (control) nothing waits: it takes the head, as before.
  a_->update_routes(stale, 1);
  send_from_a("worker/1.0", "coord/4");
  EXPECT_TRUE(eventually([&] { return at_head_ == 1; }));
}

}  // namespace
}  // namespace atl
