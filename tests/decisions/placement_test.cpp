// actors/decisions/placement: one row per case, each with the decision and its reason.
#include <gtest/gtest.h>

#include "actors/decisions/placement.hpp"

namespace atl::placement {
namespace {

using S = member_state;

TEST(Placement, CoordinatorsGoRoundRobinOverNodesThatTakePart) {
  struct row {
    const char* name;
    std::size_t fragments;
    node_facts nodes;
    std::vector<std::string> expected;  // host of each fragment; empty: nothing placed
  };
  const std::vector<row> rows = {
      {"no node", 2, {}, {}},
      {"only gone or draining nodes", 2, {{1, S::dead, false}, {2, S::draining, false}, {3, S::left, false}}, {}},
      {"one node hosts all", 3, {{1, S::active, false}}, {"node/1", "node/1", "node/1"}},
      {"two nodes alternate", 3, {{1, S::joining, false}, {2, S::syncing, false}}, {"node/1", "node/2", "node/1"}},
      {"a dead node is skipped",
       2,
       {{1, S::dead, false}, {2, S::active, false}, {3, S::active, false}},
       {"node/2", "node/3"}},
  };
  for (const auto& r : rows) {
    const auto moves = place_coordinators(r.fragments, r.nodes);
    ASSERT_EQ(moves.size(), r.expected.size()) << r.name;
    for (std::size_t f = 0; f < moves.size(); ++f) {
      EXPECT_EQ(moves[f].fragment, f) << r.name;
      EXPECT_EQ(moves[f].to, r.expected[f]) << r.name;
      EXPECT_EQ(moves[f].reason, "coordinator of fragment " + std::to_string(f) + " placed on " + r.expected[f]);
    }
  }
}

TEST(Placement, OnlyCoordinatorsOfGoneHostsMove) {
  struct row {
    const char* name;
    std::vector<std::string> placements;
    node_facts nodes;
    std::vector<coordinator_move> expected;
  };
  const node_facts one_dead = {{1, S::dead, false}, {2, S::active, false}, {3, S::active, false}};
  const std::vector<row> rows = {
      {"hosts alive", {"node/2", "node/3"}, one_dead, {}},
      {"not placed yet", {"", ""}, one_dead, {}},
      {"a dead host",
       {"node/1", "node/3"},
       one_dead,
       {{0, "node/2", "node/1 is gone; coordinator of fragment 0 re-placed on node/2"}}},
      {"a draining host keeps it", {"node/1"}, {{1, S::draining, false}, {2, S::active, false}}, {}},
      {"an unknown host",
       {"node/9", "node/2"},
       one_dead,
       {{0, "node/2", "node/9 is gone; coordinator of fragment 0 re-placed on node/2"}}},
      {"a damaged stored placement",
       {"garbage"},
       one_dead,
       {{0, "node/2", "garbage is gone; coordinator of fragment 0 re-placed on node/2"}}},
      {"nowhere to go", {"node/1"}, {{1, S::dead, false}}, {}},
  };
  for (const auto& r : rows) EXPECT_EQ(replace_orphans(r.placements, r.nodes), r.expected) << r.name;
}

TEST(Placement, AReplicaKeeperGoesToTheNewestNodeThatCanKeepAndDoesNotHostTheOther) {
  struct row {
    const char* name;
    std::uint32_t number;
    std::string current;
    std::string avoid;  // the other replica's host
    node_facts nodes;
    bool training;
    keeper_choice expected;
    std::string incoming = "";  // a hand-over's new replica's host
  };
  const node_facts keepers = {{1, S::active, true}, {2, S::active, true}, {3, S::active, false}};
  const std::vector<row> rows = {
      {"not training", 1, "", "", keepers, false, {}},
      {"first placement", 1, "", "", keepers, true, {true, "node/2", "keeper/1 placed on node/2"}},
      {"its host is alive", 1, "node/1", "", keepers, true, {}},
      {"its host drains", 1, "node/2", "", {{1, S::active, true}, {2, S::draining, true}}, true, {}},
      {"its host died",
       1,
       "node/2",
       "",
       {{1, S::active, true}, {2, S::dead, true}},
       true,
       {true, "node/1", "keeper/1 placed on node/1 (was on node/2)"}},
      {"no node can keep", 1, "", "", {{1, S::active, false}}, true, {}},
      {"its host died and none can keep",
       1,
       "node/2",
       "",
       {{1, S::active, false}, {2, S::dead, true}},
       true,
       {true, "", "node/2 is gone and no other live node can keep; keeper/0 stands in for keeper/1 in commits"}},
      {"the second replica skips the first's host",
       2,
       "",
       "node/2",
       keepers,
       true,
       {true, "node/1", "keeper/2 placed on node/1"}},
      {"the second replica has no other host",
       2,
       "",
       "node/2",
       {{1, S::active, false}, {2, S::active, true}},
       true,
       {}},
      {"the first replica moves away from the second's host",
       1,
       "node/3",
       "node/2",
       {{1, S::active, true}, {2, S::active, true}, {3, S::dead, true}},
       true,
       {true, "node/1", "keeper/1 placed on node/1 (was on node/3)"}},
      {"both hosts died and one node is left",
       2,
       "node/3",
       "node/1",
       {{1, S::active, true}, {2, S::dead, true}, {3, S::dead, true}},
       true,
       {true, "", "node/3 is gone and no other live node can keep; keeper/0 stands in for keeper/2 in commits"}},
      {"nor the host of a hand-over's new replica",
       2,
       "node/4",
       "node/1",
       {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}, {4, S::dead, true}},
       true,
       {true, "node/2", "keeper/2 placed on node/2 (was on node/4)"},
       "node/3"},
  };
  for (const auto& r : rows) {
    const auto got = choose_replica_keeper(r.number, r.current, {r.avoid, r.incoming}, r.nodes, r.training);
    EXPECT_EQ(got.changed, r.expected.changed) << r.name;
    EXPECT_EQ(got.host, r.expected.host) << r.name;
    EXPECT_EQ(got.reason, r.expected.reason) << r.name;
  }
}

TEST(Placement, KeeperGroupsSplitTheUnitsAndTheirReplicasSpreadOverTheNodes) {
  struct count_row {
    std::size_t shards, groups;
  };
  const count_row counts[] = {{1, 1}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 4}};
  for (const auto& r : counts) EXPECT_EQ(keeper_group_count(r.shards), r.groups) << r.shards << " slices";
  EXPECT_EQ(units_of_group(1, 2, 7), (std::vector<std::uint32_t>{1, 3, 5}));
  EXPECT_EQ(units_of_group(0, 1, 3), (std::vector<std::uint32_t>{0, 1, 2}));
  EXPECT_EQ(keeper_group_of(5, 1), 0u);

  using S = member_state;
  const node_facts four = {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, true}};
  struct row {
    const char* name;
    std::vector<std::string> avoid, rather_not;
    node_facts nodes;
    std::string expected;  // host chosen for keeper/3, new
  };
  const row rows[] = {
      {"a node no group uses", {"node/4"}, {"node/4", "node/3"}, four, "node/2"},
      {"every other node used: one another group uses", {"node/4"}, {"node/3", "node/2", "node/1"}, four, "node/3"},
      {"never the group's other replica's host",
       {"node/4"},
       {"node/1", "node/2", "node/3"},
       {{4, S::active, true}},
       ""},
  };
  for (const auto& r : rows) {
    const auto got = choose_replica_keeper(3, "", r.avoid, r.nodes, true, r.rather_not);
    EXPECT_EQ(got.host, r.expected) << r.name;
  }
}

// One copy local (issue 70): a replica slot goes first to the host of a coordinator of its
// group's units, unless that host cannot keep, is gone, holds the group's other replica or
// another group's.
TEST(Placement, AReplicaPrefersTheHostOfItsGroupsCoordinatorSoOneCopyStaysLocal) {
  using S = member_state;
  const node_facts four = {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, true}};
  struct row {
    const char* name;
    std::vector<std::string> avoid, rather_not, prefer;
    node_facts nodes;
    std::string expected;
  };
  const row rows[] = {
      {"the first unit's coordinator host", {}, {}, {"node/1", "node/3"}, four, "node/1"},
      {"the second when the first holds the other replica", {"node/1"}, {}, {"node/1", "node/3"}, four, "node/3"},
      {"not a host another group uses", {}, {"node/1", "node/3"}, {"node/1", "node/3"}, four, "node/4"},
      {"not a host that cannot keep", {}, {}, {"node/1"}, {{1, S::active, false}, {2, S::active, true}}, "node/2"},
      {"not a dead host", {}, {}, {"node/1"}, {{1, S::dead, true}, {2, S::active, true}}, "node/2"},
      {"no coordinator placed: the newest node", {}, {}, {"", ""}, four, "node/4"},
  };
  for (const auto& r : rows) {
    const auto got = choose_replica_keeper(3, "", r.avoid, r.nodes, true, r.rather_not, r.prefer);
    EXPECT_EQ(got.host, r.expected) << r.name;
  }
  // Four units in two groups: group 0 keeps units 0 and 2, so its slots prefer their hosts.
  const std::vector<std::string> placements = {"node/1", "node/2", "node/3", "node/4"};
  EXPECT_EQ(preferred_replica_hosts(0, 2, placements), (std::vector<std::string>{"node/1", "node/3"}));
  EXPECT_EQ(preferred_replica_hosts(1, 2, placements), (std::vector<std::string>{"node/2", "node/4"}));
  EXPECT_EQ(preferred_replica_hosts(2, 3, {"node/1", "node/2", "node/3"}), (std::vector<std::string>{"node/3", ""}));
}

TEST(Placement, CommitsGoToTwoMachinesAndOnNodesLeaveTheHeadOutOnceTwoCanKeep) {
  struct row {
    bool on_nodes;
    std::string first, second;  // the replicas' hosts
    std::vector<std::string> expected;
  };
  const std::vector<row> rows = {
      {false, "", "", {"keeper/0"}},
      {false, "node/1", "", {"keeper/0", "keeper/1"}},
      {false, "node/1", "node/2", {"keeper/0", "keeper/1"}},  // head mode places no keeper/2
      {true, "", "", {"keeper/0"}},
      {true, "node/1", "", {"keeper/0", "keeper/1"}},
      {true, "", "node/2", {"keeper/0", "keeper/2"}},
      {true, "node/1", "node/2", {"keeper/1", "keeper/2"}},
  };
  for (const auto& r : rows)
    EXPECT_EQ(commit_keepers(r.on_nodes, {{1, r.first}, {2, r.second}}, std::nullopt), r.expected)
        << r.on_nodes << " '" << r.first << "' '" << r.second << "'";
}

TEST(Placement, AHandOversIncomingReplicaTakesEveryCommitUnderItsOwnNumber) {
  const replica_handover pending{1, {5, "node/4"}};
  EXPECT_EQ(commit_keepers(true, {{3, "node/1"}, {2, "node/2"}}, pending),
            (std::vector<std::string>{"keeper/3", "keeper/2", "keeper/5"}));
  EXPECT_EQ(commit_keepers(false, {{1, "node/1"}, {2, ""}}, replica_handover{0, {4, "node/3"}}),
            (std::vector<std::string>{"keeper/0", "keeper/1", "keeper/4"}));
}

TEST(Placement, AReplicasHostThatLeavesHandsItOverFirst) {
  using S = member_state;
  using step = handover_decision::step;
  struct row {
    const char* name;
    std::vector<replica_slot> slots;
    std::optional<replica_handover> pending;
    node_facts nodes;
    bool training, ready, timed_out;
    handover_decision expected;
  };
  const std::vector<replica_slot> both = {{1, "node/1"}, {2, "node/2"}};
  const replica_handover to_three{0, {3, "node/3"}};
  const std::vector<row> rows = {
      {"nobody drains",
       both,
       {},
       {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       false,
       false,
       {}},
      {"a node without a replica drains: it goes at once",
       both,
       {},
       {{1, S::active, true}, {2, S::active, true}, {3, S::draining, true}},
       true,
       false,
       false,
       {step::none, 0, "", {"node/3"}, ""}},
      {"a replica's host drains: handed to the newest node that can keep",
       both,
       {},
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, false}},
       true,
       false,
       false,
       {step::start, 0, "node/3", {}, "node/1 is leaving; keeper/1 is handed over to node/3"}},
      {"no node can take it: the host goes, the place is filled after its goodbye",
       both,
       {},
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, false}},
       true,
       false,
       false,
       {step::none,
        0,
        "",
        {"node/1"},
        "node/1 leaves with keeper/1 and no other node can keep; the replica is placed anew after its goodbye"}},
      {"outside training nothing is handed over",
       both,
       {},
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}},
       false,
       false,
       false,
       {step::none, 0, "", {"node/1"}, ""}},
      {"pending: the host is held until the new replica caught up",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       false,
       false,
       {}},
      {"caught up: the new replica takes the place and the host goes",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       true,
       false,
       {step::promote, 0, "", {"node/1"}, "keeper/3 on node/3 caught up and takes the place of keeper/1 on node/1"}},
      {"the host crashed mid-hand-over: the new replica takes the place as it is",
       both,
       to_three,
       {{1, S::dead, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       false,
       false,
       {step::promote,
        0,
        "",
        {},
        "node/1 is gone mid-hand-over; keeper/3 on node/3 takes the place of keeper/1 and catches up from the "
        "commits"}},
      {"the new replica's host died: cancelled",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::dead, true}},
       true,
       true,
       false,
       {step::cancel, 0, "", {}, "hand-over of keeper/1 on node/1 cancelled: node/3 no longer takes part"}},
      {"the new replica's host drains too: cancelled, and it may go",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::draining, true}},
       true,
       false,
       false,
       {step::cancel, 0, "", {"node/3"}, "hand-over of keeper/1 on node/1 cancelled: node/3 no longer takes part"}},
      {"timed out: the host goes; the new replica takes the place at its goodbye",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       false,
       true,
       {step::none,
        0,
        "",
        {"node/1"},
        "hand-over of keeper/1 on node/1 timed out (cluster.handover_ms); node/1 leaves now, and keeper/3 on "
        "node/3 takes its place at its goodbye"}},
      {"the old host takes part again (a restarted head): cancelled",
       both,
       to_three,
       {{1, S::joining, true}, {2, S::active, true}, {3, S::active, true}},
       true,
       true,
       false,
       {step::cancel,
        0,
        "",
        {},
        "hand-over of keeper/1 on node/1 cancelled: node/1 takes part again",
        false,
        replica_slot{3, "node/3"}}},
      {"both hosts drain: the second waits its turn",
       both,
       to_three,
       {{1, S::draining, true}, {2, S::draining, true}, {3, S::active, true}},
       true,
       false,
       false,
       {}},
      {"both hosts drain, nothing pending: one starts, the other waits",
       both,
       {},
       {{1, S::draining, true}, {2, S::draining, true}, {3, S::active, true}},
       true,
       false,
       false,
       {step::start, 0, "node/3", {}, "node/1 is leaving; keeper/1 is handed over to node/3"}},
      {"the second place, under a number from an earlier hand-over",
       {{1, "node/1"}, {4, "node/2"}},
       {},
       {{1, S::active, true}, {2, S::draining, true}, {3, S::active, true}},
       true,
       false,
       false,
       {step::start, 1, "node/3", {}, "node/2 is leaving; keeper/4 is handed over to node/3"}},
  };
  for (const auto& r : rows) {
    const auto got = decide_handover(r.slots, r.pending, r.nodes, r.training, r.ready, r.timed_out);
    EXPECT_EQ(static_cast<int>(got.what), static_cast<int>(r.expected.what)) << r.name;
    EXPECT_EQ(got.slot, r.expected.slot) << r.name;
    EXPECT_EQ(got.host, r.expected.host) << r.name;
    EXPECT_EQ(got.release, r.expected.release) << r.name;
    EXPECT_EQ(got.reason, r.expected.reason) << r.name;
    EXPECT_EQ(got.drop, r.expected.drop) << r.name;
    EXPECT_FALSE(got.spreading) << r.name << ": one group, nothing to spread";
  }
}

// Keeper groups placed while few nodes could keep share them; a node that keeps nothing,
// joined since, takes one of a crowded group's replicas by a hand-over ("spreading"), and
// the old replica stops on its host, which stays.
TEST(Placement, AReplicaThatSharesANodeWithAnotherGroupMovesToANodeThatKeepsNothing) {
  using S = member_state;
  using step = handover_decision::step;
  struct row {
    const char* name;
    std::optional<replica_handover> pending;
    node_facts nodes;
    bool ready, timed_out;
    std::vector<std::string> other_groups;
    handover_decision expected;
  };
  const std::vector<replica_slot> group = {{3, "node/1"}, {4, "node/2"}};
  const node_facts four = {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, true}};
  const replica_handover spreading{0, {7, "node/4"}, true};
  const std::vector<std::string> crowd = {"node/1", "node/2"};  // the other group's replicas
  const std::vector<row> rows = {
      {"no node keeps nothing: nothing moves", {}, four, false, false, {"node/1", "node/2", "node/3", "node/4"}, {}},
      {"no other group on its nodes: nothing moves", {}, four, false, false, {"node/3", "node/4"}, {}},
      {"a node keeps nothing: the first crowded place moves to the newest such",
       {},
       four,
       false,
       false,
       crowd,
       {step::start,
        0,
        "node/4",
        {},
        "keeper/3 on node/1 shares its node with another keeper group; handed over to node/4, which keeps nothing",
        true}},
      {"a node that cannot keep takes none",
       {},
       {{1, S::active, true}, {2, S::active, true}, {3, S::active, false}},
       false,
       false,
       crowd,
       {}},
      {"spreading, not caught up: nothing yet, nobody held", spreading, four, false, false, crowd, {}},
      {"spreading, caught up: the new replica takes the place, the old one stops",
       spreading,
       four,
       true,
       false,
       crowd,
       {step::promote,
        0,
        "",
        {},
        "keeper/7 on node/4 caught up and takes the place of keeper/3 on node/1, which stops there",
        false,
        replica_slot{3, "node/1"}}},
      {"spreading, the old host died: the new replica takes the place as it is",
       spreading,
       {{1, S::dead, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, true}},
       false,
       false,
       crowd,
       {step::promote,
        0,
        "",
        {},
        "node/1 is gone while spreading; keeper/7 on node/4 takes the place of keeper/3 and catches up from the "
        "commits"}},
      {"spreading timed out: cancelled, the incoming one stops",
       spreading,
       four,
       false,
       true,
       crowd,
       {step::cancel,
        0,
        "",
        {},
        "spreading keeper/3 on node/1 to node/4 timed out (cluster.handover_ms)",
        false,
        replica_slot{7, "node/4"}}},
      {"spreading, the incoming host left: cancelled",
       spreading,
       {{1, S::active, true}, {2, S::active, true}, {3, S::active, true}, {4, S::dead, true}},
       true,
       false,
       crowd,
       {step::cancel, 0, "", {}, "hand-over of keeper/3 on node/1 cancelled: node/4 no longer takes part"}},
      {"spreading, the old host begins to leave: it waits for the new replica",
       spreading,
       {{1, S::draining, true}, {2, S::active, true}, {3, S::active, true}, {4, S::active, true}},
       false,
       false,
       crowd,
       {}},
  };
  for (const auto& r : rows) {
    const auto got = decide_handover(group, r.pending, r.nodes, true, r.ready, r.timed_out, r.other_groups);
    EXPECT_EQ(static_cast<int>(got.what), static_cast<int>(r.expected.what)) << r.name;
    EXPECT_EQ(got.slot, r.expected.slot) << r.name;
    EXPECT_EQ(got.host, r.expected.host) << r.name;
    EXPECT_EQ(got.release, r.expected.release) << r.name;
    EXPECT_EQ(got.reason, r.expected.reason) << r.name;
    EXPECT_EQ(got.spreading, r.expected.spreading) << r.name;
    EXPECT_EQ(got.drop, r.expected.drop) << r.name;
  }
}

TEST(Placement, AStartingCoordinatorResumesFromTheNewestRoundOnceEveryKeeperAnswered) {
  using answers = std::map<std::string, std::optional<std::uint64_t>>;
  struct row {
    const char* name;
    std::vector<std::string> keepers;
    answers answered;
    std::optional<std::string> expected;
  };
  const std::vector<row> rows = {
      {"nobody answered yet", {"keeper/1", "keeper/2"}, {}, std::nullopt},
      {"one still to answer", {"keeper/1", "keeper/2"}, {{"keeper/2", 7}}, std::nullopt},
      {"the newest wins",
       {"keeper/0", "keeper/1", "keeper/2"},
       {{"keeper/0", 3}, {"keeper/1", 9}, {"keeper/2", 8}},
       "keeper/1"},
      {"a round beats none found", {"keeper/1", "keeper/2"}, {{"keeper/1", std::nullopt}, {"keeper/2", 0}}, "keeper/2"},
      {"a tie: the first in Membership order",
       {"keeper/2", "keeper/1"},
       {{"keeper/1", 5}, {"keeper/2", 5}},
       "keeper/2"},
      {"none holds a round: a new run",
       {"keeper/1", "keeper/2"},
       {{"keeper/1", std::nullopt}, {"keeper/2", std::nullopt}},
       "keeper/1"},
      {"an answer from a keeper no longer committed to is not waited for nor used",
       {"keeper/2"},
       {{"keeper/1", 12}, {"keeper/2", 4}},
       "keeper/2"},
      {"no keepers", {}, {{"keeper/1", 1}}, std::nullopt},
  };
  for (const auto& r : rows) EXPECT_EQ(resume_source(r.keepers, r.answered), r.expected) << r.name;
}

}  // namespace
}  // namespace atl::placement
