// The ZeroMQ transport with real sockets on loopback, in one process.
#include <chrono>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "runtime/transport/control_client.hpp"
#include "runtime/transport/zmq_transport.hpp"
#include "tests/support/eventually.hpp"

namespace atl {
namespace {

TEST(ZmqTransport, RoutesOfControlClientsStayBounded) {
  directory dir;  // no registry: requests are counted as unknown_peer after their route is learned
  cluster_identity cluster("c");
  zmq_transport head(zmq_transport::role::server, "tcp://127.0.0.1:0", dir, cluster);
  const std::size_t clients = zmq_transport::max_client_routes + 40;
  for (std::size_t i = 0; i < clients; ++i)
    (void)control_request(head.bound_endpoint(), "status", "", std::chrono::milliseconds(1));
  // Wait until the I/O thread has seen every request (each was refused: no registry here).
  for (int i = 0; i < 200 && head.counters().refused[static_cast<std::size_t>(errc::unknown_peer)] < clients; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(head.counters().refused[static_cast<std::size_t>(errc::unknown_peer)].load(), clients);
  EXPECT_LE(head.route_count(), zmq_transport::max_client_routes);
  EXPECT_GE(head.route_count(), zmq_transport::max_client_routes - 1);
}

// Keeps the messages it is given, for the test to look at.
struct kept_messages {
  std::mutex mu;
  std::vector<wire::message_ptr> all;
  std::size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return all.size();
  }
  wire::message_ptr last() {
    std::lock_guard<std::mutex> lock(mu);
    return all.back();
  }
};

caf::behavior keeping_actor(caf::event_based_actor*, kept_messages* kept) {
  return {[kept](const wire::message_ptr& msg) {
    std::lock_guard<std::mutex> lock(kept->mu);
    kept->all.push_back(msg);
  }};
}

// A large received frame is borrowed from ZeroMQ, not copied (runtime/transport/zmq_transport.cpp
// to_frames): its bytes must still arrive whole where it is delivered, and where the
// head relays it on (the relay sends the frames the message was decoded from).
TEST(ZmqTransport, ALargeTensorArrivesWholeDeliveredAndRelayed) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  cluster_identity cluster("c");
  kept_messages at_head, at_b;
  directory head_dir, a_dir, b_dir;
  head_dir.add("registry", sys.spawn(keeping_actor, &at_head));
  b_dir.add("worker/2.0", sys.spawn(keeping_actor, &at_b));
  zmq_transport head(zmq_transport::role::server, "tcp://127.0.0.1:0", head_dir, cluster);
  zmq_transport a(zmq_transport::role::client, head.bound_endpoint(), a_dir, cluster);
  zmq_transport b(zmq_transport::role::client, head.bound_endpoint(), b_dir, cluster);
  std::vector<float> values(1 << 18);  // 1 MiB: well over the size that is borrowed
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f;
  auto send = [&](transport& from, const std::string& sender, const std::string& receiver, bool with_tensor) {
    mailer mail(from, sender, "c");
    wire::outgoing out;
    out.envelope.initStateRequest().setFragment(0);
    if (with_tensor) out.tensors.push_back(wire::tensor::from_floats(values.data(), values.size()));
    mail.send(receiver, 1, out);
  };
  send(b, "worker/2.0", "registry", false);  // the head learns where worker/2.0 is
  ASSERT_TRUE(testing::eventually([&] { return at_head.size() == 1; }));

  send(a, "worker/1.0", "registry", true);
  ASSERT_TRUE(testing::eventually([&] { return at_head.size() == 2; }));
  ASSERT_EQ(at_head.last()->tensors().size(), 1u);
  EXPECT_EQ(at_head.last()->tensors()[0].to_floats(), values);

  send(a, "worker/1.0", "worker/2.0", true);
  ASSERT_TRUE(testing::eventually([&] { return at_b.size() == 1; }));
  ASSERT_EQ(at_b.last()->tensors().size(), 1u);
  EXPECT_EQ(at_b.last()->tensors()[0].to_floats(), values);
  EXPECT_GE(head.counters().tensor_bytes_relayed.load(), values.size() * sizeof(float));

  a.stop();
  b.stop();
  head.stop();
  for (auto* dir : {&head_dir, &b_dir})
    for (const auto& id : dir->ids()) caf::anon_send_exit(dir->find(id), caf::exit_reason::user_shutdown);
}

// The head counts its link's bytes by payload kind: what came in over the socket and what
// its actors handed to it; a delivery inside the head's process is neither.
TEST(ZmqTransport, TheLinkIsCountedByPayloadKindInAndOut) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  cluster_identity cluster("c");
  kept_messages at_head, at_a;
  directory head_dir, a_dir;
  head_dir.add("registry", sys.spawn(keeping_actor, &at_head));
  head_dir.add("keeper/0", sys.spawn(keeping_actor, &at_head));
  a_dir.add("worker/1.0", sys.spawn(keeping_actor, &at_a));
  zmq_transport head(zmq_transport::role::server, "tcp://127.0.0.1:0", head_dir, cluster);
  zmq_transport a(zmq_transport::role::client, head.bound_endpoint(), a_dir, cluster);
  const auto slot = [](schema::Envelope::Which kind) { return traffic_counters::kind_slot(kind); };
  mailer worker(a, "worker/1.0", "c");
  wire::outgoing request;
  request.envelope.initStateRequest().setFragment(0);
  const auto request_bytes = worker.send("registry", 1, request);
  ASSERT_TRUE(testing::eventually([&] { return at_head.size() == 1; }));
  EXPECT_EQ(head.counters().kind_bytes_in[slot(schema::Envelope::STATE_REQUEST)].load(), request_bytes);
  EXPECT_EQ(a.counters().kind_bytes_out[slot(schema::Envelope::STATE_REQUEST)].load(), request_bytes);

  mailer registry(head, "registry", "c");
  wire::outgoing held;
  held.envelope.initStateHeld().setFragment(0);
  const auto held_bytes = registry.send("worker/1.0", 1, held);
  ASSERT_TRUE(testing::eventually([&] { return at_a.size() == 1; }));
  EXPECT_EQ(head.counters().kind_bytes_out[slot(schema::Envelope::STATE_HELD)].load(), held_bytes);
  EXPECT_EQ(a.counters().kind_bytes_in[slot(schema::Envelope::STATE_HELD)].load(), held_bytes);

  wire::outgoing local;
  local.envelope.initStateHeld().setFragment(1);
  registry.send("keeper/0", 1, local);  // in the head's process: not on its link
  ASSERT_TRUE(testing::eventually([&] { return at_head.size() == 2; }));
  EXPECT_EQ(head.counters().kind_bytes_out[slot(schema::Envelope::STATE_HELD)].load(), held_bytes);
  std::uint64_t other = 0;
  for (std::size_t k = 0; k < traffic_counters::kinds; ++k)
    if (k != slot(schema::Envelope::STATE_REQUEST) && k != slot(schema::Envelope::STATE_HELD))
      other += head.counters().kind_bytes_in[k].load() + head.counters().kind_bytes_out[k].load();
  EXPECT_EQ(other, 0u);

  a.stop();
  head.stop();
  for (auto* dir : {&head_dir, &a_dir})
    for (const auto& id : dir->ids()) caf::anon_send_exit(dir->find(id), caf::exit_reason::user_shutdown);
}

// A head that watches node connections hears, by node id, that the connection a node
// last spoke from closed (the client transport gone, as with a killed process), and only
// for nodes: a worker's or a control client's closed connection is not reported.
TEST(ZmqTransport, TheHeadHearsWhenTheConnectionANodeSpokeFromCloses) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  cluster_identity cluster("c");
  kept_messages at_head;
  directory head_dir, node_dir, worker_dir;
  head_dir.add("registry", sys.spawn(keeping_actor, &at_head));
  std::mutex mu;
  std::vector<std::string> closed;
  zmq_link_options options;
  options.on_node_disconnected = [&](const std::string& node) {
    std::lock_guard<std::mutex> lock(mu);
    closed.push_back(node);
  };
  zmq_transport head(zmq_transport::role::server, "tcp://127.0.0.1:0", head_dir, cluster, {}, {}, options);
  const auto closed_now = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return closed;
  };
  auto say = [](transport& from, const std::string& sender) {
    mailer mail(from, sender, "c");
    wire::outgoing out;
    out.envelope.initHeartbeat().setNodeId(3);
    mail.send("registry", 1, out);
  };
  auto node = std::make_unique<zmq_transport>(zmq_transport::role::client, head.bound_endpoint(), node_dir, cluster);
  auto worker =
      std::make_unique<zmq_transport>(zmq_transport::role::client, head.bound_endpoint(), worker_dir, cluster);
  say(*node, "node/3");
  say(*worker, "worker/4.0");
  ASSERT_TRUE(testing::eventually([&] { return at_head.size() == 2; }));
  EXPECT_TRUE(closed_now().empty()) << "nothing closed yet";

  worker.reset();  // not a node: not reported
  node.reset();
  ASSERT_TRUE(testing::eventually([&] { return !closed_now().empty(); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // a wrong extra report would show by now
  EXPECT_EQ(closed_now(), (std::vector<std::string>{"node/3"}));
}

// A node given several heads (`atoll join --head A,B`) reaches the one that listens, and
// the next one when that one goes and another binds: nothing queues for a head that does
// not listen (a standby), so nothing is lost to it. Control requests do the same.
TEST(ZmqTransport, AClientGivenSeveralHeadsReachesTheOneThatListens) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  cluster_identity cluster("c");
  kept_messages at_first, at_second;
  directory first_dir, second_dir, node_dir;
  first_dir.add("registry", sys.spawn(keeping_actor, &at_first));
  second_dir.add("registry", sys.spawn(keeping_actor, &at_second));
  auto first = std::make_unique<zmq_transport>(zmq_transport::role::server, "tcp://127.0.0.1:0", first_dir, cluster);
  // The second head's address is known but nothing listens there yet: bind, note, close.
  std::string second_ep;
  {
    zmq_transport probe(zmq_transport::role::server, "tcp://127.0.0.1:0", node_dir, cluster);
    second_ep = probe.bound_endpoint();
  }
  zmq_transport node(zmq_transport::role::client, first->bound_endpoint() + "," + second_ep, node_dir, cluster);
  std::size_t said = 0;
  auto say = [&] {
    ++said;
    mailer mail(node, "node/3", "c");
    wire::outgoing out;
    out.envelope.initHeartbeat().setNodeId(3);
    mail.send("registry", 1, out);
  };
  ASSERT_TRUE(testing::eventually([&] {
    say();
    return at_first.size() >= 1;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  said = at_first.size();  // those sent before the connection completed were dropped, never queued
  for (int i = 0; i < 20; ++i) say();
  EXPECT_TRUE(testing::eventually([&] { return at_first.size() == said; }))
      << at_first.size() << " of " << said << ": every message goes to the head that listens, none waits for the other";
  EXPECT_EQ(at_second.size(), 0u);
  // A control request too (this registry keeps it and does not answer).
  (void)control_request(first->bound_endpoint() + "," + second_ep, "status", "", std::chrono::milliseconds(300));
  EXPECT_TRUE(testing::eventually([&] { return at_first.size() == said + 1; }));
  EXPECT_TRUE(at_first.last()->envelope().isControlRequest());

  first.reset();  // the leader goes; the standby binds its address and takes over
  zmq_transport second(zmq_transport::role::server, second_ep, second_dir, cluster);
  const auto before = at_first.size();
  ASSERT_TRUE(testing::eventually(
      [&] {
        say();
        return at_second.size() >= 1;
      },
      std::chrono::seconds(10), std::chrono::milliseconds(50)));
  EXPECT_EQ(at_first.size(), before);
  node.stop();
  second.stop();
  for (auto* dir : {&first_dir, &second_dir})
    for (const auto& id : dir->ids()) caf::anon_send_exit(dir->find(id), caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace atl
