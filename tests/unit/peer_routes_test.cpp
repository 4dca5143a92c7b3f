// runtime/transport/peer_routes: where a message goes and who may send it, one row per case; the
// PeerTable round trip; the endpoint a node advertises.
#include <gtest/gtest.h>

#include <capnp/message.h>

#include "runtime/transport/head_endpoints.hpp"
#include "runtime/transport/node_links.hpp"
#include "runtime/transport/peer_routes.hpp"

namespace atl {
namespace {

// Node 1 listens, node 2 listens with another key, node 3 is relayed; coord/0 on node 2,
// coord/1 on node 3, keeper/1 on node 1.
route_table sample() {
  route_table t;
  t.epoch = 7;
  t.nodes[1] = {"tcp://10.0.0.1:7071", "key-one"};
  t.nodes[2] = {"tcp://10.0.0.2:7071", "key-two"};
  t.nodes[3] = {"", "key-three"};
  t.placed["coord/0"] = 2;
  t.placed["coord/1"] = 3;
  t.placed["keeper/1"] = 1;
  t.placed["keeper/2"] = 2;
  t.placed["keeper/5"] = 3;  // a hand-over's new replica
  return t;
}

TEST(PeerRoutes, ChoosesDirectOnlyToAListeningPeer) {
  const route direct_one{route::kind::direct, 1, "tcp://10.0.0.1:7071", "key-one"};
  const route direct_two{route::kind::direct, 2, "tcp://10.0.0.2:7071", "key-two"};
  const route head{};
  struct row {
    const char* receiver;
    std::uint32_t self;
    route expected;
  };
  const row rows[] = {
      {"worker/2.0", 1, direct_two},  // a worker: by its id
      {"node/1", 2, direct_one},     {"coord/0", 1, direct_two},  // a coordinator: by placement
      {"keeper/1", 2, direct_one},  // the replica keepers: by placement
      {"keeper/2", 1, direct_two},   {"coord/1", 1, head},  // placed on a relayed node
      {"worker/3.0", 1, head},  // a relayed node's worker
      {"coord/0", 2, head},  // our own, not started yet: as before, through the head
      {"coord/5", 1, head},  // not placed
      {"worker/9.0", 1, head},  // not a member
      {"registry", 1, head},  // the head's actors
      {"keeper/0", 1, head},         {"ctl/abc", 1, head},       {"not an id", 1, head},
  };
  const auto table = sample();
  for (const auto& r : rows) EXPECT_EQ(choose_route(table, r.self, r.receiver), r.expected) << r.receiver;
  EXPECT_EQ(choose_route(route_table{}, 1, "worker/2.0"), head) << "no table yet: everything through the head";
}

TEST(PeerRoutes, AKeySpeaksOnlyForItsNodesIds) {
  struct row {
    const char* sender;
    const char* key;
    bool allowed;
  };
  const row rows[] = {
      {"worker/1.0", "key-one", true},
      {"node/1", "key-one", true},
      {"keeper/1", "key-one", true},  // placed on node 1
      {"keeper/2", "key-two", true},  // placed on node 2
      {"keeper/2", "key-one", false},  // another node's keeper
      {"coord/0", "key-two", true},  // placed on node 2
      {"worker/2.0", "key-one", false},  // another node's worker
      {"coord/0", "key-one", false},  // another node's coordinator
      {"node/2", "key-three", false},
      {"coord/5", "key-one", false},  // a coordinator placed nowhere
      {"registry", "key-one", false},  // the head's own actors
      {"keeper/0", "key-two", false},
      {"ctl/abc", "key-one", true},  // atollctl and nodes before their Welcome
      {"node/pending-xyz", "stranger", true},
      {"node/9", "stranger", true},  // not a member: the registry fences it by epoch
      {"worker/9.0", "stranger", true},
      {"worker/1.0", "", true},  // plain TCP: no identities
      {"bad id", "key-one", false},
  };
  const auto table = sample();
  for (const auto& r : rows) EXPECT_EQ(!check_sender(table, r.sender, r.key), r.allowed) << r.sender << " " << r.key;
  EXPECT_EQ(check_sender(table, "worker/2.0", "key-one").code, errc::sender_conflict);
  EXPECT_EQ(check_sender(table, "bad id", "key-one").code, errc::malformed_id);
}

TEST(PeerRoutes, ASharedKeySpeaksForEveryNodeThatUsesIt) {
  route_table t;
  t.nodes[1] = {"tcp://a:1", "cluster-key"};
  t.nodes[2] = {"tcp://b:1", "cluster-key"};
  EXPECT_FALSE(check_sender(t, "worker/2.0", "cluster-key"));
  EXPECT_FALSE(check_sender(t, "worker/1.0", "cluster-key"));
  EXPECT_TRUE(check_sender(t, "worker/1.0", "another-key"));
}

// Tensors for a coordinator or keeper whose host has left the table wait for the next
// table (the actor is being placed elsewhere); everything else goes as choose_route says.
TEST(PeerRoutes, OnlyAPlacedActorWhoseHostLeftTheTableAwaitsItsNewPlacement) {
  auto t = sample();
  t.placed["coord/4"] = 7;  // node 7 left: coord/4 is being re-placed
  t.placed["keeper/6"] = 7;
  EXPECT_TRUE(awaits_new_placement(t, "coord/4"));
  EXPECT_TRUE(awaits_new_placement(t, "keeper/6"));
  EXPECT_FALSE(awaits_new_placement(t, "coord/0"));  // its host is in the table
  EXPECT_FALSE(awaits_new_placement(t, "keeper/1"));
  EXPECT_FALSE(awaits_new_placement(t, "coord/9"));  // never placed: the head's business
  EXPECT_FALSE(awaits_new_placement(t, "worker/7.0"));  // workers are routed by their id
  EXPECT_FALSE(awaits_new_placement(t, "registry"));
  EXPECT_FALSE(awaits_new_placement(t, "not an id"));
}

TEST(PeerRoutes, ThePeerTableMessageCarriesTheWholeTable) {
  const auto table = sample();
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<schema::PeerTable>();
  write_peer_table(table, msg);
  const auto back = read_peer_table(msg.asReader());
  EXPECT_EQ(back.epoch, table.epoch);
  ASSERT_EQ(back.nodes.size(), table.nodes.size());
  for (const auto& [id, peer] : table.nodes) {
    EXPECT_EQ(back.nodes.at(id).endpoint, peer.endpoint);
    EXPECT_EQ(back.nodes.at(id).public_key, peer.public_key);
  }
  EXPECT_EQ(back.placed, table.placed);
}

TEST(PeerRoutes, AHostThatIsNotANodeIdRoutesThroughTheHead) {
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<schema::PeerTable>();
  auto coordinators = msg.initCoordinators(2);
  coordinators.set(0, "garbage");
  coordinators.set(1, "node/4");
  auto keepers = msg.initKeepers(4);
  keepers[0].setKeeper("keeper/1");
  keepers[0].setHost("worker/1.0");  // not a node
  keepers[1].setKeeper("keeper/0");  // the head's own keeper is never on a node
  keepers[1].setHost("node/2");
  keepers[2].setKeeper("coord/3");  // not a keeper
  keepers[2].setHost("node/2");
  keepers[3].setKeeper("keeper/7");  // a hand-over's new replica
  keepers[3].setHost("node/5");
  const auto table = read_peer_table(msg.asReader());
  EXPECT_EQ(table.placed.count("coord/0"), 0u);
  EXPECT_EQ(table.placed.at("coord/1"), 4u);
  EXPECT_EQ(table.placed.count("keeper/1"), 0u);
  EXPECT_EQ(table.placed.count("keeper/0"), 0u);
  EXPECT_EQ(table.placed.count("coord/3"), 0u);
  EXPECT_EQ(table.placed.at("keeper/7"), 5u);
}

TEST(NodeLinks, AdvertisesAWildcardBindAsTheAddressTowardsTheHead) {
  EXPECT_EQ(advertised_endpoint("tcp://0.0.0.0:7071", "10.0.0.5"), "tcp://10.0.0.5:7071");
  EXPECT_EQ(advertised_endpoint("tcp://*:7071", "10.0.0.5"), "tcp://10.0.0.5:7071");
  EXPECT_EQ(advertised_endpoint("tcp://10.0.0.2:41000", "10.0.0.5"), "tcp://10.0.0.2:41000");
  EXPECT_EQ(advertised_endpoint("ipc:///tmp/x", "10.0.0.5"), "");
  EXPECT_EQ(advertised_endpoint("tcp://nohostport", "10.0.0.5"), "");
  EXPECT_EQ(local_address_towards("tcp://127.0.0.1:7070"), "127.0.0.1");
  EXPECT_EQ(local_address_towards("not an endpoint"), "127.0.0.1");
  EXPECT_EQ(local_address_towards("tcp://127.0.0.1:7070,tcp://10.9.9.9:7070"), "127.0.0.1") << "the first head";
}

TEST(NodeLinks, SeveralHeadsAreSplitAtCommas) {
  EXPECT_EQ(split_endpoints("tcp://a:1"), (std::vector<std::string>{"tcp://a:1"}));
  EXPECT_EQ(split_endpoints("tcp://a:1,tcp://b:2"), (std::vector<std::string>{"tcp://a:1", "tcp://b:2"}));
  EXPECT_EQ(split_endpoints(",tcp://a:1,,"), (std::vector<std::string>{"tcp://a:1"}));
  EXPECT_TRUE(split_endpoints("").empty());
}

}  // namespace
}  // namespace atl
