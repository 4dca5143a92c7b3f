// CurveZMQ keys and the ZAP handler, with real sockets on loopback (RELIABILITY.md S7).
// A CURVE head admits a client with the cluster's key; a client with an unknown key or
// without security fails the handshake and no message reaches any actor.
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "runtime/transport/control_client.hpp"
#include "runtime/transport/security.hpp"
#include "runtime/transport/zmq_transport.hpp"
#include "tests/support/counting_actor.hpp"
#include "tests/support/eventually.hpp"
#include "tests/support/test_dir.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using testing::counting_actor;
using testing::eventually;

class CurveHead : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(check_curve_available());
    ASSERT_FALSE(write_key_folder(keys_.str()));
    auto server = load_server_security(keys_.str());
    ASSERT_TRUE(server) << server.err().describe();
    dir_.add("registry", sys_.spawn(counting_actor, &delivered_));
    head_ = std::make_unique<zmq_transport>(zmq_transport::role::server, "tcp://127.0.0.1:0", dir_, cluster_,
                                            wire::limits{}, *server);
  }
  void TearDown() override {
    head_->stop();
    for (const auto& id : dir_.ids()) caf::anon_send_exit(dir_.find(id), caf::exit_reason::user_shutdown);
    dir_.clear();
  }
  // One status request; the counting actor never answers, so this always times out.
  void request(const link_security& sec) { (void)control_request(head_->bound_endpoint(), "status", "", 600ms, sec); }

  testing::temp_dir keys_;
  caf::actor_system_config cfg_;
  caf::actor_system sys_{cfg_};
  directory dir_;
  cluster_identity cluster_{"c"};
  std::atomic<int> delivered_{0};
  std::unique_ptr<zmq_transport> head_;
};

TEST_F(CurveHead, AdmitsTheClusterKey) {
  auto client = load_client_security(keys_.str());
  ASSERT_TRUE(client) << client.err().describe();
  request(*client);
  EXPECT_TRUE(eventually([&] { return delivered_ == 1; }));
  EXPECT_EQ(head_->counters().auth_admitted.load(), 1u);
  EXPECT_EQ(head_->counters().auth_denied.load(), 0u);
}

TEST_F(CurveHead, RefusesAnUnknownKeyAndDeliversNothing) {
  auto client = load_client_security(keys_.str());
  ASSERT_TRUE(client);
  auto stranger = generate_keypair();
  ASSERT_TRUE(stranger);
  client->own = *stranger;  // knows the head's public key, but is not authorized
  request(*client);
  EXPECT_TRUE(eventually([&] { return head_->counters().auth_denied >= 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(delivered_.load(), 0);
  EXPECT_EQ(head_->counters().messages_in.load(), 0u);
  EXPECT_EQ(head_->counters().auth_admitted.load(), 0u);
}

TEST_F(CurveHead, RefusesAClientWithoutSecurityAndDeliversNothing) {
  request(link_security{});
  EXPECT_TRUE(eventually([&] { return head_->counters().handshakes_failed >= 1; }));
  std::this_thread::sleep_for(200ms);
  EXPECT_EQ(delivered_.load(), 0);
  EXPECT_EQ(head_->counters().messages_in.load(), 0u);
  EXPECT_EQ(head_->counters().refused_total(), 0u);  // nothing even reached the decoder
}

TEST_F(CurveHead, RefusesAClientThatTrustsAnotherHead) {
  auto client = load_client_security(keys_.str());
  ASSERT_TRUE(client);
  auto impostor = generate_keypair();
  ASSERT_TRUE(impostor);
  client->server_public_key = impostor->public_key;  // the client would talk to the wrong server
  request(*client);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(delivered_.load(), 0);
  EXPECT_EQ(head_->counters().auth_admitted.load(), 0u);
}

// An authenticated peer that claims an id another live connection speaks for is refused:
// it must not take over the route of another node's actors.
TEST_F(CurveHead, ASenderIdStaysWithItsLiveConnection) {
  auto keys = load_client_security(keys_.str());
  ASSERT_TRUE(keys);
  zmq::context_t ctx;
  const auto connect = [&] {
    zmq::socket_t s(ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    apply_client_security(s, *keys);
    s.connect(head_->bound_endpoint());
    return s;
  };
  const auto send_as = [&](zmq::socket_t& s, const std::string& sender) {
    wire::outgoing out;
    out.envelope.setSender(sender);
    out.envelope.setReceiver("registry");
    out.envelope.setClusterId("c");
    out.envelope.initHeartbeat().setNodeId(1);
    auto frames = wire::encode(out);
    s.send(zmq::const_buffer(frames[0].data(), frames[0].size()), zmq::send_flags::none);
  };
  auto node = connect(), impostor = connect();
  send_as(node, "node/1");
  ASSERT_TRUE(eventually([&] { return delivered_ == 1; }));
  send_as(impostor, "node/1");
  const auto conflicts = [&] {
    return head_->counters().refused[static_cast<std::size_t>(errc::sender_conflict)].load();
  };
  ASSERT_TRUE(eventually([&] { return conflicts() == 1; }));
  EXPECT_EQ(delivered_.load(), 1);
  send_as(node, "node/1");  // the owner still gets through
  EXPECT_TRUE(eventually([&] { return delivered_ == 2; }));
  EXPECT_EQ(conflicts(), 1u);
}

TEST(KeyFolder, NamedClientKeysAreAuthorized) {
  testing::temp_dir keys;
  ASSERT_FALSE(write_key_folder(keys.str()));
  auto path = add_client_key(keys.str(), "gpu-node-7");
  ASSERT_TRUE(path) << path.err().describe();
  auto server = load_server_security(keys.str());
  ASSERT_TRUE(server);
  EXPECT_EQ(server->authorized.size(), 2u);
  auto client = load_client_security(keys.str(), *path);
  ASSERT_TRUE(client);
  EXPECT_EQ(server->authorized.count(client->own.public_key), 1u);
  EXPECT_TRUE(add_client_key(keys.str(), "bad/name").err().message.find("bad/name") != std::string::npos);
}

TEST(KeyFolder, NeverOverwritesKeys) {
  testing::temp_dir keys;
  ASSERT_FALSE(write_key_folder(keys.str()));
  auto before = load_server_security(keys.str());
  ASSERT_TRUE(before);
  auto err = write_key_folder(keys.str());
  EXPECT_EQ(err.code, errc::invalid_config);
  EXPECT_NE(err.message.find("exists"), std::string::npos);
  EXPECT_EQ(load_server_security(keys.str())->own.secret_key, before->own.secret_key);
}

TEST(KeyFolder, BadKeyFilesNameTheFileAndLine) {
  testing::temp_dir keys;
  ASSERT_FALSE(write_key_folder(keys.str()));
  std::ofstream(keys.sub("client.key")) << "public = short\n";
  auto client = load_client_security(keys.str());
  ASSERT_FALSE(client);
  EXPECT_EQ(client.err().code, errc::invalid_config);
  EXPECT_NE(client.err().message.find("client.key:1"), std::string::npos) << client.err().message;
  std::ofstream(keys.sub("authorized_keys")) << "# nobody\n";
  auto server = load_server_security(keys.str());
  ASSERT_FALSE(server);
  EXPECT_NE(server.err().message.find("lists no client keys"), std::string::npos);
  EXPECT_FALSE(load_client_security(keys.sub("missing")));
}

TEST(Endpoints, OnlyLoopbackCountsAsLocal) {
  EXPECT_TRUE(is_local_endpoint("tcp://127.0.0.1:7070"));
  EXPECT_TRUE(is_local_endpoint("tcp://localhost:7070"));
  EXPECT_TRUE(is_local_endpoint("ipc:///tmp/atoll"));
  EXPECT_FALSE(is_local_endpoint("tcp://0.0.0.0:7070"));
  EXPECT_FALSE(is_local_endpoint("tcp://10.0.0.1:7070"));
  EXPECT_FALSE(is_local_endpoint("tcp://*:7070"));
}

}  // namespace
}  // namespace atl
