// The Membership as deltas (actors/shared/membership_delta.hpp): what a coordinator ends
// with after each kind of change, when it must ask for the whole one instead, and that under
// lost, duplicated and reordered deltas it ends holding the registry's.
#include <capnp/message.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "actors/shared/membership_delta.hpp"

namespace atl {
namespace {

membership_view three_workers() {
  membership_view v;
  v.epoch = 7;
  v.workers = {"worker/1.0", "worker/2.0", "worker/3.0"};
  v.quorum = 2;
  v.keepers = {"keeper/1", "keeper/2"};
  return v;
}

held_membership holding(const membership_view& v) {
  held_membership held;
  EXPECT_EQ(held.apply(whole_membership(v)), held_membership::verdict::changed);
  return held;
}

struct change_row {
  const char* name;
  std::function<void(membership_view&)> make;
  std::size_t added, removed;
};

TEST(MembershipDelta, EachChangeCarriesOnlyItselfAndTheCoordinatorReachesTheRegistrys) {
  const std::vector<change_row> rows = {
      {"a worker joins", [](membership_view& v) { v.workers.push_back("worker/4.0"); }, 1, 0},
      {"a worker leaves", [](membership_view& v) { v.workers.erase(v.workers.begin() + 1); }, 0, 1},
      {"one leaves, two join",
       [](membership_view& v) {
         v.workers.erase(v.workers.begin());
         v.workers.insert(v.workers.end(), {"worker/0.0", "worker/9.0"});
       },
       2, 1},
      {"the quorum changes", [](membership_view& v) { v.quorum = 1; }, 0, 0},
      {"a keeper is replaced",
       [](membership_view& v) {
         v.keepers = {"keeper/1", "keeper/3"};
       },
       0, 0},
      {"nothing but the epoch", [](membership_view&) {}, 0, 0},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.name);
    const auto before = three_workers();
    auto after = before;
    after.epoch = before.epoch + 1;
    row.make(after);
    std::sort(after.workers.begin(), after.workers.end());
    const auto d = diff_membership(before, after);
    EXPECT_TRUE(d.delta);
    EXPECT_EQ(d.base_epoch, before.epoch);
    EXPECT_EQ(d.view.workers.size(), row.added);
    EXPECT_EQ(d.removed.size(), row.removed);
    auto held = holding(before);
    EXPECT_EQ(held.apply(d), held_membership::verdict::changed);
    EXPECT_EQ(held.view(), after);
    EXPECT_EQ(held.digest(), members_digest(after));
    EXPECT_EQ(held.apply(d), held_membership::verdict::unchanged) << "a duplicate changes nothing";
  }
}

TEST(MembershipDelta, AGapOrAnotherDigestAsksForTheWholeAndKeepsWhatIsHeld) {
  const auto e7 = three_workers();
  auto e8 = e7;
  e8.epoch = 8;
  e8.workers.push_back("worker/4.0");
  auto e9 = e8;
  e9.epoch = 9;
  e9.workers.erase(e9.workers.begin());
  using verdict = held_membership::verdict;
  struct row {
    const char* name;
    membership_delta sent;
    verdict expected;
  };
  auto wrong_digest = diff_membership(e7, e8);
  wrong_digest.digest ^= 1;
  auto whole_without_digest = whole_membership(e9);  // as a sender from before deltas wrote it
  whole_without_digest.digest = 0;
  const row rows[] = {
      {"the next delta", diff_membership(e7, e8), verdict::changed},
      {"a delta from a base it does not hold (one was lost)", diff_membership(e8, e9), verdict::needs_whole},
      {"a delta that would not reach the sender's digest", wrong_digest, verdict::needs_whole},
      {"the version check of what it holds", diff_membership(e7, e7), verdict::unchanged},
      {"a whole Membership of a later epoch", whole_membership(e9), verdict::changed},
      {"a whole one without a digest", whole_without_digest, verdict::changed},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto held = holding(e7);
    EXPECT_EQ(held.apply(r.sent), r.expected);
    if (r.expected == verdict::needs_whole) {
      EXPECT_EQ(held.view(), e7) << "changed by a delta it could not apply";
    }
  }
  // Held at e9 (a whole answered its request first): the older deltas still on their way
  // are late, and the one that leads to e9 is already there.
  auto held = holding(e9);
  EXPECT_EQ(held.apply(diff_membership(e7, e8)), verdict::unchanged);
  EXPECT_EQ(held.apply(diff_membership(e8, e9)), verdict::unchanged);
  EXPECT_EQ(held.view(), e9);
  // A coordinator holding nothing (just placed) asks for the whole on any delta.
  held_membership fresh;
  EXPECT_EQ(fresh.apply(diff_membership(e8, e9)), verdict::needs_whole);
  EXPECT_FALSE(fresh.holds_any());
}

TEST(MembershipDelta, TheMessageCarriesEveryField) {
  auto before = three_workers();
  auto after = before;
  after.epoch = 8;
  after.workers = {"worker/2.0", "worker/5.0"};
  after.keepers = {"keeper/3"};
  const auto sent = diff_membership(before, after);
  capnp::MallocMessageBuilder builder;
  write_membership(sent, builder.initRoot<schema::Membership>());
  const auto got = read_membership(builder.getRoot<schema::Membership>().asReader());
  EXPECT_TRUE(got.delta);
  EXPECT_EQ(got.base_epoch, 7u);
  EXPECT_EQ(got.view, sent.view);
  EXPECT_EQ(got.removed, sent.removed);
  EXPECT_EQ(got.digest, sent.digest);
}

// Keeper groups: the Membership lists each group's keepers in turn; a coordinator takes its
// unit's group's (unit mod groups), and a change of the groups changes the digest.
TEST(MembershipDelta, EachUnitCommitsToItsKeeperGroupsKeepers) {
  membership_view v = three_workers();
  v.keepers = {"keeper/1", "keeper/2", "keeper/3", "keeper/0", "keeper/4"};
  v.keeper_group_sizes = {2, 3};  // group 1 has a hand-over's incoming replica beside keeper/0
  struct row {
    const char* name;
    std::uint32_t unit;
    std::vector<std::string> expected;
  };
  const row rows[] = {
      {"unit 0: group 0", 0, {"keeper/1", "keeper/2"}},
      {"unit 1: group 1", 1, {"keeper/3", "keeper/0", "keeper/4"}},
      {"unit 6: group 0", 6, {"keeper/1", "keeper/2"}},
      {"unit 7: group 1", 7, {"keeper/3", "keeper/0", "keeper/4"}},
  };
  for (const auto& r : rows) EXPECT_EQ(keepers_of_unit(v, r.unit), r.expected) << r.name;

  auto one_group = v;
  one_group.keeper_group_sizes.clear();
  EXPECT_EQ(keepers_of_unit(one_group, 1), one_group.keepers) << "one group: every keeper";
  EXPECT_NE(members_digest(one_group), members_digest(v));
  auto short_list = v;
  short_list.keeper_group_sizes = {2, 4};
  EXPECT_TRUE(keepers_of_unit(short_list, 1).empty()) << "sizes past the list: the head's keeper";

  // Carried by the message and by a delta, and reached by the coordinator.
  capnp::MallocMessageBuilder builder;
  write_membership(whole_membership(v), builder.initRoot<schema::Membership>());
  EXPECT_EQ(read_membership(builder.getRoot<schema::Membership>().asReader()).view.keeper_group_sizes,
            v.keeper_group_sizes);
  auto held = holding(one_group);
  auto next = v;
  next.epoch = one_group.epoch + 1;
  EXPECT_EQ(held.apply(diff_membership(one_group, next)), held_membership::verdict::changed);
  EXPECT_EQ(held.view(), next);
}

// The registry publishes a random sequence of Memberships as deltas to one coordinator over
// a link that drops, duplicates and reorders; the coordinator asks for the whole one when it
// must (answered with the registry's current). Once the faults stop, the next tick's version
// check leaves it holding the registry's Membership, for every seed.
TEST(MembershipDelta, UnderDropsDuplicatesAndReorderingTheCoordinatorEndsHoldingThePublishedOne) {
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto current = three_workers();
    std::optional<membership_view> published;
    held_membership held;
    std::vector<membership_delta> in_flight;
    int next_worker = 10;
    const auto publish = [&] {
      const auto d = published ? diff_membership(*published, current) : whole_membership(current);
      published = current;
      return d;
    };
    const auto deliver = [&](const membership_delta& d) {
      if (held.apply(d) == held_membership::verdict::needs_whole) in_flight.push_back(whole_membership(current));
    };
    for (int step = 0; step < 60; ++step) {
      // A change: a join, a leave, or a new quorum.
      current.epoch += 1;
      const auto what = rng() % 3;
      if (what == 0 || current.workers.size() < 2) {
        current.workers.push_back("worker/" + std::to_string(next_worker++) + ".0");
        std::sort(current.workers.begin(), current.workers.end());
      } else if (what == 1) {
        current.workers.erase(current.workers.begin() + static_cast<long>(rng() % current.workers.size()));
      } else {
        current.quorum = 1 + rng() % 3;
      }
      const auto d = publish();
      const auto fate = rng() % 4;  // 0: lost, 1: twice, else once
      if (fate != 0) in_flight.push_back(d);
      if (fate == 1) in_flight.push_back(d);
      std::shuffle(in_flight.begin(), in_flight.end(), rng);
      while (!in_flight.empty() && rng() % 2) {
        const auto next = in_flight.back();
        in_flight.pop_back();
        deliver(next);
      }
    }
    while (!in_flight.empty()) {  // the faults stop: what is on its way arrives
      const auto next = in_flight.front();
      in_flight.erase(in_flight.begin());
      deliver(next);
    }
    deliver(publish());  // the tick's version check (and the whole it may ask for)
    while (!in_flight.empty()) {
      const auto next = in_flight.front();
      in_flight.erase(in_flight.begin());
      deliver(next);
    }
    EXPECT_EQ(held.view(), current);
    EXPECT_EQ(held.digest(), members_digest(current));
  }
}

}  // namespace
}  // namespace atl
