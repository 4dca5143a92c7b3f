// Protocol tier: the real node agent on CAF's deterministic scheduler, the test playing the
// registry. A head that no longer leads (cut off, then deposed: a standby took over at a
// higher epoch) may still send what it believed; the node refuses every registry message
// below the highest epoch it has seen, and acts on the new head's.
#include <gtest/gtest.h>

#include <algorithm>

#include "actors/node/node_agent.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/transport/route_delta.hpp"
#include "storage/kv_store.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/throw_point.hpp"

namespace atl {
namespace {

using testing::recorder;

class NodeAgentProtocol : public ::testing::Test {
 protected:
  NodeAgentProtocol() : sys_(testing::deterministic(cfg_)), sched_(testing::test_scheduler(sys_)) {}

  void SetUp() override {
    dir_.add(registry_id(), sys_.spawn(recorder, &to_registry_));
    node_agent_config cfg;
    cfg.devices = {};  // no workers: the placements are what this test is about
    cfg.data_dir = "memory";  // it may host a keeper replica, on a store in memory
    cfg.open_keeper_store = [](const std::string&) -> expected<std::unique_ptr<kv_store>> {
      return make_memory_store();
    };
    cfg.on_routes = [this](const routes_update& update) { routes_seen_.push_back(update.table); };
    agent_ = sys_.spawn(node_agent_actor, static_cast<transport*>(&net_), &dir_, &cluster_, cfg);
    sched_.run();
    ASSERT_FALSE(to_registry_.empty());
    ASSERT_TRUE(to_registry_.front()->envelope().isHello());
    provisional_ = to_registry_.front()->sender();
  }

  void TearDown() override {
    for (const auto& id : dir_.ids()) caf::anon_send_exit(dir_.find(id), caf::exit_reason::user_shutdown);
    caf::anon_send_exit(agent_, caf::exit_reason::user_shutdown);
    dir_.clear();
    sched_.run();
  }

  // As the registry, at `epoch`.
  void from_registry(const std::string& to, std::uint64_t epoch, wire::outgoing& out) {
    mailer as_registry(net_, registry_id(), "cluster-n");
    as_registry.send(to, epoch, out);
    sched_.run();
  }
  void welcome(std::uint64_t epoch) {
    wire::outgoing out;
    auto w = out.envelope.initWelcome();
    w.setNodeId(1);
    w.setConfigToml("[diloco]\nfragments = 2\n");
    from_registry(provisional_, epoch, out);
  }
  void place_coordinator(std::uint32_t fragment, std::uint64_t epoch) {
    wire::outgoing out;
    out.envelope.initPlaceCoordinator().setFragment(fragment);
    from_registry("node/1", epoch, out);
  }
  void peer_table(const route_delta& d, std::uint64_t epoch) {
    wire::outgoing out;
    write_route_delta(d, out.envelope.initPeerTable());
    from_registry("node/1", epoch, out);
  }
  std::size_t whole_tables_asked() const {
    return static_cast<std::size_t>(std::count_if(to_registry_.begin(), to_registry_.end(),
                                                  [](const auto& m) { return m->envelope().isPeerTableRequest(); }));
  }
  std::vector<errc> refusals() const {
    std::vector<errc> codes;
    for (const auto& m : to_registry_)
      if (m->envelope().isRefusal()) codes.push_back(static_cast<errc>(m->envelope().getRefusal().getCode()));
    return codes;
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  directory dir_;
  cluster_identity cluster_;
  memory_transport net_{dir_, cluster_};
  std::vector<wire::message_ptr> to_registry_;
  caf::actor agent_;
  std::string provisional_;
  std::vector<route_table> routes_seen_;  // what the node handed its links
};

TEST_F(NodeAgentProtocol, PlacementsFromAHeadBelowTheEpochItHasSeenAreRefused) {
  welcome(5);
  ASSERT_TRUE(dir_.contains("node/1")) << "the node took its id";
  place_coordinator(0, 7);  // the new leader (a takeover raised the epoch)
  EXPECT_TRUE(dir_.contains("coord/0"));
  EXPECT_TRUE(refusals().empty());

  place_coordinator(1, 5);  // the deposed head, still believing it leads
  EXPECT_FALSE(dir_.contains("coord/1")) << "a deposed head placed a coordinator";
  EXPECT_EQ(refusals(), std::vector<errc>{errc::stale_epoch});

  wire::outgoing bye;
  bye.envelope.initShutdown().setReason("from the deposed head");
  from_registry("node/1", 6, bye);
  EXPECT_TRUE(dir_.contains("node/1")) << "a deposed head's Shutdown stopped the node";
  EXPECT_EQ(refusals().size(), 2u);

  place_coordinator(1, 7);  // the leader's own placement still works
  EXPECT_TRUE(dir_.contains("coord/1"));
}

// No message may kill an actor (actors/shared/guarded_handler.hpp): a placement the node
// agent's handler threw on is refused as unreadable; the node takes the next.
TEST_F(NodeAgentProtocol, AHandlerThatThrowsRefusesItsMessageAndTheNodeAgentGoesOn) {
  ATL_SKIP_WITHOUT_THROW_POINTS();
  welcome(5);
  {
    const testing::armed_throw_point armed("node.handler");
    place_coordinator(0, 5);
    EXPECT_FALSE(dir_.contains("coord/0"));
    EXPECT_EQ(refusals(), std::vector<errc>{errc::malformed_frame});
  }
  place_coordinator(0, 5);
  EXPECT_TRUE(dir_.contains("coord/0")) << "the node agent did not go on";
  EXPECT_EQ(refusals().size(), 1u);
}

// A keeper replica the registry placed elsewhere (a spreading hand-over promoted another,
// a cancelled one's incoming) is stopped on DropKeeper; the node stays. A drop of one it
// does not host, or from anyone but the registry, changes nothing.
TEST_F(NodeAgentProtocol, ADroppedKeeperReplicaStopsAndTheNodeStays) {
  welcome(5);
  wire::outgoing place;
  auto p = place.envelope.initPlaceKeeper();
  p.setKeeper("keeper/3");
  p.setSource("keeper/4");
  p.initUnits(2).set(1, 3);  // units 0 and 3 of its group
  from_registry("node/1", 5, place);
  ASSERT_TRUE(dir_.contains("keeper/3")) << "the replica runs";
  const auto drop = [&](const char* keeper, const std::string& sender) {
    wire::outgoing out;
    out.envelope.initDropKeeper().setKeeper(keeper);
    mailer as(net_, sender, "cluster-n");
    as.send("node/1", 5, out);
    sched_.run();
  };
  drop("keeper/7", registry_id());
  drop("keeper/3", "node/2");
  EXPECT_TRUE(dir_.contains("keeper/3")) << "a drop of another keeper, or from a node, stopped it";
  drop("keeper/3", registry_id());
  EXPECT_FALSE(dir_.contains("keeper/3"));
  EXPECT_TRUE(dir_.contains("node/1")) << "the node stays";
  drop("keeper/3", registry_id());  // repeated: nothing left to stop
  EXPECT_TRUE(refusals().empty());
}

// PeerTables come as deltas (runtime/transport/route_delta.hpp): the node hands its links a
// table only when one changed something, and a delta it cannot apply (one before it was
// lost) makes it ask for the whole table, once a heartbeat interval, keeping its own till then.
TEST_F(NodeAgentProtocol, ANodeThatMissedARouteChangeAsksForTheWholeTableAndThenHoldsTheRegistrys) {
  welcome(5);
  route_table t5;
  t5.epoch = 5;
  t5.nodes[1] = {"tcp://10.0.0.1:1", ""};
  auto t6 = t5;
  t6.epoch = 6;
  t6.nodes[2] = {"", ""};
  auto t7 = t6;
  t7.epoch = 7;
  t7.placed["coord/0"] = 2;

  peer_table(whole_routes(t5), 5);
  ASSERT_EQ(routes_seen_.size(), 1u);
  EXPECT_EQ(routes_digest(routes_seen_.back()), routes_digest(t5));
  peer_table(diff_routes(t5, t5), 5);  // a version check
  EXPECT_EQ(routes_seen_.size(), 1u) << "an unchanged table is not handed over again";
  EXPECT_EQ(whole_tables_asked(), 0u);

  peer_table(diff_routes(t6, t7), 7);  // 5 -> 6 was lost
  EXPECT_EQ(whole_tables_asked(), 1u);
  EXPECT_EQ(routes_seen_.size(), 1u) << "a delta on another base is not applied";
  peer_table(diff_routes(t7, t7), 7);  // the next version check, within the same interval
  EXPECT_EQ(whole_tables_asked(), 1u) << "asked again before a heartbeat interval passed";

  peer_table(whole_routes(t7), 7);
  ASSERT_EQ(routes_seen_.size(), 2u);
  EXPECT_EQ(routes_digest(routes_seen_.back()), routes_digest(t7));
  auto t8 = t7;
  t8.epoch = 8;
  t8.nodes.erase(1);
  peer_table(diff_routes(t7, t8), 8);
  ASSERT_EQ(routes_seen_.size(), 3u);
  EXPECT_EQ(routes_digest(routes_seen_.back()), routes_digest(t8));
  EXPECT_EQ(whole_tables_asked(), 1u);
  EXPECT_TRUE(refusals().empty());

  // Its heartbeats name the table it holds: the registry answers only a node that is behind.
  wire::outgoing ask;
  ask.envelope.initHeartbeatRequest().setNodeId(1);
  from_registry("node/1", 8, ask);
  const auto last = std::find_if(to_registry_.rbegin(), to_registry_.rend(),
                                 [](const auto& m) { return m->envelope().isHeartbeat(); });
  ASSERT_NE(last, to_registry_.rend());
  EXPECT_EQ((*last)->envelope().getHeartbeat().getRoutesEpoch(), 8u);
  EXPECT_EQ((*last)->envelope().getHeartbeat().getRoutesDigest(), routes_digest(t8));
}

}  // namespace
}  // namespace atl
