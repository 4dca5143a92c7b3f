// What the simulated nodes of `bench scale` time (tools/sim_nodes/membership_watch.hpp):
// joins from a node's start to the first table naming it, faults to the first newer table
// without the node as another node received it, and whether the healthy nodes agree.
#include <gtest/gtest.h>

#include "runtime/transport/route_delta.hpp"
#include "tools/sim_nodes/membership_watch.hpp"

namespace atl::sim {
namespace {

using namespace std::chrono_literals;

route_table table(std::uint64_t epoch, std::initializer_list<std::uint32_t> nodes) {
  route_table t;
  t.epoch = epoch;
  for (auto id : nodes) t.nodes[id] = {"", ""};
  return t;
}

// Node `index` (id `self`) came to hold `t` at `at`.
std::vector<watch_event> seen(membership_watch& w, std::size_t index, std::uint32_t self, const route_table& t,
                              clock::time_point at) {
  return w.table_seen(index, self, t, routes_digest(t), at);
}

TEST(MembershipWatch, AJoinIsTimedToTheFirstTableThatNamesTheNode) {
  membership_watch w;
  const auto t0 = clock::now();
  w.started(0, t0);
  EXPECT_TRUE(seen(w, 0, 0, table(1, {}), t0 + 10ms).empty()) << "no id yet";
  EXPECT_TRUE(seen(w, 0, 7, table(2, {3}), t0 + 20ms).empty()) << "a table without it";
  const auto joined = seen(w, 0, 7, table(3, {3, 7}), t0 + 250ms);
  ASSERT_EQ(joined.size(), 1u);
  EXPECT_EQ(joined[0].what, "joined");
  EXPECT_EQ(joined[0].node, 7u);
  EXPECT_NEAR(joined[0].seconds, 0.25, 1e-6);
  EXPECT_TRUE(seen(w, 0, 7, table(4, {3, 7}), t0 + 300ms).empty()) << "timed once";
  EXPECT_EQ(w.members(), 1u);
}

TEST(MembershipWatch, AFaultIsTimedByAnotherNodeToTheFirstNewerTableWithoutIt) {
  membership_watch w;
  const auto t0 = clock::now();
  w.started(0, t0);
  w.started(1, t0);
  seen(w, 0, 1, table(5, {1, 2}), t0);
  seen(w, 1, 2, table(5, {1, 2}), t0);
  EXPECT_FALSE(w.fault(2, "kill", t0)) << "no node 2 here";
  ASSERT_TRUE(w.fault(1, "kill", t0 + 1s));
  EXPECT_FALSE(w.fault(1, "leave", t0 + 1s)) << "a node has one fault";
  EXPECT_EQ(w.healthy_members(), std::vector<std::size_t>{0});
  EXPECT_TRUE(seen(w, 1, 2, table(6, {1}), t0 + 1100ms).empty()) << "the victim's own view times nothing";
  EXPECT_TRUE(seen(w, 0, 1, table(5, {1}), t0 + 1200ms).empty()) << "not newer than the last naming it";
  const auto gone = seen(w, 0, 1, table(6, {1}), t0 + 1500ms);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].what, "kill");
  EXPECT_EQ(gone[0].node, 2u);
  EXPECT_NEAR(gone[0].seconds, 0.5, 1e-6);
  EXPECT_EQ(w.faults_pending(), 0u);
}

TEST(MembershipWatch, TheHealthyNodesAgreeWhenTheyHoldOneTable) {
  membership_watch w;
  const auto t0 = clock::now();
  for (std::size_t i = 0; i < 3; ++i) w.started(i, t0);
  seen(w, 0, 1, table(4, {1, 2, 3}), t0);
  seen(w, 1, 2, table(4, {1, 2, 3}), t0);
  seen(w, 2, 3, table(3, {1, 2, 3}), t0);  // one behind
  auto a = w.tables_held();
  EXPECT_EQ(a.holders, 3u);
  EXPECT_EQ(a.distinct, 2u);
  seen(w, 2, 3, table(4, {1, 2, 3}), t0);
  a = w.tables_held();
  EXPECT_EQ(a.distinct, 1u);
  EXPECT_EQ(a.epoch, 4u);
  EXPECT_EQ(a.listed, 3u);
}

}  // namespace
}  // namespace atl::sim
