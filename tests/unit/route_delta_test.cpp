// The PeerTable as deltas (runtime/transport/route_delta.hpp): what a node ends with after
// each kind of change, and when it must ask for the whole table instead.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>

#include "runtime/transport/route_delta.hpp"

namespace atl {
namespace {

route_table three_nodes() {
  route_table t;
  t.epoch = 7;
  t.nodes[1] = {"tcp://10.0.0.1:5000", "key1"};
  t.nodes[2] = {"", "key2"};  // relayed
  t.nodes[3] = {"tcp://10.0.0.3:5000", "key3"};
  t.placed["coord/0"] = 1;
  t.placed["keeper/1"] = 3;
  return t;
}

// A change made to the registry's table, by name.
struct change_row {
  const char* name;
  std::function<void(route_table&)> make;
  std::size_t upserts, removals;
  bool placements;
};

TEST(RouteDelta, EachChangeCarriesOnlyItselfAndTheNodeReachesTheRegistrysTable) {
  const std::vector<change_row> rows = {
      {"a node joins",
       [](route_table& t) {
         t.nodes[4] = {"tcp://10.0.0.4:5000", "key4"};
       },
       1, 0, false},
      {"a node leaves", [](route_table& t) { t.nodes.erase(2); }, 0, 1, false},
      {"a node moves its endpoint", [](route_table& t) { t.nodes[1].endpoint = "tcp://10.0.0.9:5000"; }, 1, 0, false},
      {"a coordinator is re-placed", [](route_table& t) { t.placed["coord/0"] = 3; }, 0, 0, true},
      {"a keeper's host dies",
       [](route_table& t) {
         t.nodes.erase(3);
         t.placed.erase("keeper/1");
       },
       0, 1, true},
      {"nothing but the epoch", [](route_table&) {}, 0, 0, false},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    const auto before = three_nodes();
    auto after = before;
    after.epoch = before.epoch + 1;
    row.make(after);
    const auto d = diff_routes(before, after);
    EXPECT_TRUE(d.delta);
    EXPECT_EQ(d.base_epoch, before.epoch);
    EXPECT_EQ(d.table.nodes.size(), row.upserts);
    EXPECT_EQ(d.removed.size(), row.removals);
    EXPECT_EQ(d.placements_changed, row.placements);

    held_routes mine(before);  // the node held the registry's last table
    ASSERT_EQ(mine.apply(d), route_verdict::applied);
    EXPECT_EQ(mine.table().epoch, after.epoch);
    EXPECT_EQ(mine.table().placed, after.placed);
    EXPECT_EQ(routes_digest(mine.table()), routes_digest(after));
    EXPECT_EQ(mine.digest(), routes_digest(after)) << "the digest kept as the delta was applied";
  }
}

TEST(RouteDelta, ANodeThatMissedAChangeKeepsItsTableAndNeedsTheWholeOne) {
  const auto e7 = three_nodes();
  auto e8 = e7;
  e8.epoch = 8;
  e8.nodes.erase(2);
  auto e9 = e8;
  e9.epoch = 9;
  e9.placed["coord/0"] = 3;
  held_routes mine(e7);  // the delta 7 -> 8 was lost
  EXPECT_EQ(mine.apply(diff_routes(e8, e9)), route_verdict::needs_whole_table);
  EXPECT_EQ(mine.table().epoch, 7u);
  EXPECT_EQ(mine.table().nodes.size(), 3u);
  EXPECT_EQ(mine.digest(), routes_digest(e7));
  // The version check of the next tick says the same: its base is not ours.
  EXPECT_EQ(mine.apply(diff_routes(e9, e9)), route_verdict::needs_whole_table);
  // The whole table repairs it; the next version check then passes.
  EXPECT_EQ(mine.apply(whole_routes(e9)), route_verdict::applied);
  EXPECT_EQ(mine.digest(), routes_digest(e9));
  EXPECT_EQ(mine.apply(diff_routes(e9, e9)), route_verdict::applied);
}

TEST(RouteDelta, ADeltaThatDoesNotReachTheSendersDigestIsNotApplied) {
  const auto before = three_nodes();
  auto after = before;
  after.epoch = 8;
  after.nodes[4] = {"tcp://10.0.0.4:5000", "key4"};
  auto d = diff_routes(before, after);
  auto wrong = before;
  wrong.nodes[2].public_key = "another";  // same epoch, other contents: the node's copy went wrong
  held_routes mine(wrong);
  EXPECT_EQ(mine.apply(d), route_verdict::needs_whole_table);
  EXPECT_EQ(mine.table().nodes.at(2).public_key, "another") << "left as it was";
  EXPECT_FALSE(mine.table().nodes.count(4));
  EXPECT_EQ(mine.digest(), routes_digest(wrong));
}

TEST(RouteDelta, TheVersionCheckOfAnUnchangedTableIsEmpty) {
  const auto t = three_nodes();
  const auto d = diff_routes(t, t);
  EXPECT_TRUE(d.table.nodes.empty());
  EXPECT_TRUE(d.removed.empty());
  EXPECT_FALSE(d.placements_changed);
  EXPECT_EQ(d.base_epoch, d.table.epoch);
  // The one a registry answers a heartbeat with, made from the version alone.
  const auto check = version_check(t.epoch, routes_digest(t));
  EXPECT_TRUE(check.delta);
  EXPECT_EQ(check.base_epoch, d.base_epoch);
  EXPECT_EQ(check.table, d.table);
  EXPECT_EQ(check.removed, d.removed);
  EXPECT_EQ(check.placements_changed, d.placements_changed);
  EXPECT_EQ(check.digest, d.digest);
}

TEST(RouteDelta, TheMessageCarriesDeltasAndWholeTablesBothWays) {
  const auto before = three_nodes();
  auto after = before;
  after.epoch = 8;
  after.nodes.erase(1);
  after.nodes[5] = {"tcp://10.0.0.5:5000", "key5"};
  after.placed["coord/0"] = 5;
  // Each message with the table its receiver holds: the change from `before`, the version
  // check of `after`, and the whole table to a node that holds nothing.
  const std::vector<std::pair<route_delta, route_table>> sent_and_held = {
      {diff_routes(before, after), before}, {diff_routes(after, after), after}, {whole_routes(after), route_table{}}};
  for (const auto& [sent, held] : sent_and_held) {
    capnp::MallocMessageBuilder builder;
    auto msg = builder.initRoot<schema::PeerTable>();
    write_route_delta(sent, msg);
    const auto got = read_route_delta(msg.asReader());
    EXPECT_EQ(got.delta, sent.delta);
    EXPECT_EQ(got.base_epoch, sent.base_epoch);
    EXPECT_EQ(got.removed, sent.removed);
    EXPECT_EQ(got.placements_changed, sent.placements_changed);
    EXPECT_EQ(got.digest, sent.digest);
    held_routes mine(held);
    ASSERT_EQ(mine.apply(got), route_verdict::applied);
    EXPECT_EQ(mine.digest(), routes_digest(after));
  }
}

TEST(RouteDelta, ATableFromASenderWithoutDeltasIsWhole) {
  capnp::MallocMessageBuilder builder;
  auto msg = builder.initRoot<schema::PeerTable>();
  write_peer_table(three_nodes(), msg);  // the fields an older registry sets
  const auto got = read_route_delta(msg.asReader());
  EXPECT_FALSE(got.delta);
  held_routes mine;
  EXPECT_EQ(mine.apply(got), route_verdict::applied);
  EXPECT_EQ(mine.table().nodes.size(), 3u);
  EXPECT_EQ(mine.table().placed, three_nodes().placed);
}

// What a node's links may close when a delta is applied in place: the endpoints no node has.
TEST(RouteDelta, AppliedInPlaceADeltaNamesTheEndpointsNoNodeHasAnyMore) {
  struct row {
    const char* name;
    std::function<void(route_table&)> make;
    std::set<std::string> gone;
  };
  const std::vector<row> rows = {
      {"a listening node leaves", [](route_table& t) { t.nodes.erase(1); }, {"tcp://10.0.0.1:5000"}},
      {"a relayed node leaves", [](route_table& t) { t.nodes.erase(2); }, {}},
      {"a node moves its endpoint",
       [](route_table& t) { t.nodes[3].endpoint = "tcp://10.0.0.9:5000"; },
       {"tcp://10.0.0.3:5000"}},
      {"a node comes back under a new id at its endpoint",
       [](route_table& t) {
         t.nodes.erase(3);
         t.nodes[4] = {"tcp://10.0.0.3:5000", "key4"};
       },
       {}},
      {"a coordinator is re-placed", [](route_table& t) { t.placed["coord/0"] = 3; }, {}},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    const auto before = three_nodes();
    auto after = before;
    after.epoch = 8;
    r.make(after);
    auto mine = before;
    EXPECT_EQ(apply_delta_in_place(mine, diff_routes(before, after)), r.gone);
    EXPECT_EQ(routes_digest(mine), routes_digest(after));
  }
}

// The node's side: what each PeerTable makes it do.
TEST(RouteDelta, TheFollowerHandsOnChangesIgnoresPassedChecksAndAsksForTheWholeTableOnceAnInterval) {
  using effect = route_follower::effect;
  const auto t7 = three_nodes();
  auto t8 = t7;
  t8.epoch = 8;
  t8.nodes.erase(2);
  auto t9 = t8;
  t9.epoch = 9;
  const auto t0 = std::chrono::steady_clock::time_point{} + std::chrono::hours(1);
  const std::chrono::milliseconds interval{1000};
  route_follower f;
  EXPECT_EQ(f.on_table(whole_routes(t7), t0, interval), effect::hand_table_to_links);
  EXPECT_EQ(f.on_table(diff_routes(t7, t7), t0, interval), effect::nothing) << "a passed version check";
  EXPECT_EQ(f.on_table(diff_routes(t8, t9), t0, interval), effect::ask_for_whole_table) << "7 -> 8 was lost";
  EXPECT_EQ(f.on_table(diff_routes(t9, t9), t0 + std::chrono::milliseconds(500), interval), effect::nothing)
      << "asked again within the interval";
  EXPECT_EQ(f.on_table(diff_routes(t9, t9), t0 + interval, interval), effect::ask_for_whole_table);
  EXPECT_EQ(routes_digest(f.table()), routes_digest(t7)) << "its table is kept meanwhile";
  EXPECT_EQ(f.on_table(whole_routes(t9), t0 + interval, interval), effect::hand_table_to_links);
  EXPECT_EQ(routes_digest(f.table()), routes_digest(t9));
  EXPECT_EQ(f.on_table(diff_routes(t9, t9), t0 + interval, interval), effect::nothing) << "checked on its digest";
  auto other = diff_routes(t9, t9);
  other.digest ^= 1;  // the registry's table of this epoch is not the one held
  EXPECT_EQ(f.on_table(other, t0 + 3 * interval, interval), effect::ask_for_whole_table);
}

// Seeded: the registry's side (a delta to each node of the last table, the whole table to a
// node new to it or asking, a version check to a node whose heartbeat names another table)
// and the nodes' route_follower, over links that drop, duplicate and reorder. Once the faults
// stop, within a few heartbeats every node holds the published table, for every seed.
TEST(RouteDelta, UnderDropsDuplicatesAndReorderingEveryNodeEndsHoldingThePublishedTable) {
  using effect = route_follower::effect;
  using clock = std::chrono::steady_clock;
  const std::chrono::milliseconds tick{100}, heartbeat{1000};
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const auto chance = [&](double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; };
    route_table published;
    std::uint64_t digest = routes_digest(published);
    std::map<std::uint32_t, route_follower> nodes;
    std::map<std::uint32_t, std::vector<route_delta>> in_flight;  // to each node, unordered
    std::uint32_t next_id = 1;
    bool faults = true;
    const auto send = [&](std::uint32_t to, const route_delta& d) {
      if (faults && chance(0.2)) return;  // dropped
      in_flight[to].push_back(d);
      if (faults && chance(0.1)) in_flight[to].push_back(d);  // duplicated
    };
    const auto publish = [&](route_table next) {
      next.epoch = published.epoch + 1;
      const auto change = diff_routes(published, next);
      for (const auto& [id, _] : next.nodes) send(id, published.nodes.count(id) ? change : whole_routes(next));
      published = std::move(next);
      digest = routes_digest(published);
    };
    auto now = clock::time_point{} + std::chrono::hours(1);
    for (int step = 0; step < 600; ++step) {
      faults = step < 400;  // then the schedule quiets down
      now += tick;
      if (faults && chance(0.3)) {  // a change: a join, a leave, a new endpoint, a re-placement
        auto next = published;
        const auto pick = [&]() -> std::uint32_t {
          auto it = next.nodes.begin();
          std::advance(it, std::uniform_int_distribution<std::size_t>(0, next.nodes.size() - 1)(rng));
          return it->first;
        };
        const int kind = next.nodes.size() < 3 ? 0 : static_cast<int>(rng() % 4);
        if (kind == 0) {
          const auto id = next_id++;
          next.nodes[id] = {"tcp://10.0.0." + std::to_string(id) + ":5000", "key" + std::to_string(id)};
          nodes[id];  // it starts holding nothing
        } else if (kind == 1) {
          next.nodes.erase(pick());
        } else if (kind == 2) {
          next.nodes[pick()].endpoint = "tcp://10.0.1." + std::to_string(step) + ":5000";
        } else {
          next.placed["coord/0"] = pick();
        }
        publish(std::move(next));
      }
      for (auto& [id, follower] : nodes) {
        auto& queue = in_flight[id];
        while (!queue.empty() && chance(0.7)) {  // delivered in any order
          const auto at = std::uniform_int_distribution<std::size_t>(0, queue.size() - 1)(rng);
          const auto d = queue[at];
          queue.erase(queue.begin() + static_cast<std::ptrdiff_t>(at));
          if (follower.on_table(d, now, heartbeat) == effect::ask_for_whole_table && published.nodes.count(id) &&
              !(faults && chance(0.2)))  // the request too may be lost
            send(id, whole_routes(published));
        }
        // Its heartbeat, every tenth tick, names the table it holds.
        if ((step + static_cast<int>(id)) % 10 == 0 && published.nodes.count(id) && !(faults && chance(0.2)) &&
            (follower.table().epoch != published.epoch || follower.digest() != digest))
          send(id, version_check(published.epoch, digest));
      }
    }
    for (const auto& [id, follower] : nodes) {
      if (!published.nodes.count(id)) continue;  // it left: nothing is sent to it
      EXPECT_EQ(follower.digest(), digest) << "node " << id;
      EXPECT_EQ(follower.table(), published) << "node " << id;
    }
  }
}

}  // namespace
}  // namespace atl
