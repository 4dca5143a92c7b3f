// Protocol tier: the real node agent on CAF's deterministic scheduler, the test playing the
// registry. A head that no longer leads (cut off, then deposed: a standby took over at a
// higher epoch) may still send what it believed; the node refuses every registry message
// below the highest epoch it has seen, and acts on the new head's.
#include <gtest/gtest.h>
#include "actors/node/node_agent.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "tests/deterministic.hpp"

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

}  // namespace
}  // namespace atl
