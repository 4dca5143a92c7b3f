// actors/decisions/quorum: the one quorum policy, one row per case.
#include <gtest/gtest.h>

#include "actors/decisions/quorum.hpp"

namespace atl::quorum {
namespace {

using namespace std::chrono_literals;

struct row {
  const char* name;
  view v;
  options opt;
  std::chrono::milliseconds since_first;  // now - first_contribution
  verdict expected;
};

TEST(QuorumPolicy, DecidesEachCase) {
  const time_point t0{};
  const options two{2, 0ms}, two_deadline{2, 1000ms};
  auto open_round = [](std::size_t members, std::size_t participants, std::size_t contributed, std::size_t published) {
    view v;
    v.has_membership = true;
    v.members = members;
    v.published = published;
    v.round_open = true;
    v.participants = participants;
    v.contributed = contributed;
    if (contributed > 0) v.first_contribution = time_point{};
    return v;
  };
  view none;
  view one_member{true, 1, 0, false, 0, 0, {}, {}};
  view two_members{true, 2, 0, false, 0, 0, {}, {}};
  view empty_published_one{true, 0, 1, false, 0, 0, {}, {}};
  view tail_one{true, 1, 1, false, 0, 0, {}, {}};
  const std::vector<row> rows = {
      {"no membership yet", none, two, 0ms, {decision::wait, reason::no_membership, 2}},
      {"fewer members than min_workers", one_member, two, 0ms, {decision::wait, reason::too_few_members, 2}},
      {"no members at all", empty_published_one, two, 0ms, {decision::wait, reason::too_few_members, 1}},
      {"min_workers members", two_members, two, 0ms, {decision::open, reason::enough_members, 2}},
      {"the tail's published quorum of one", tail_one, two, 0ms, {decision::open, reason::enough_members, 1}},
      {"no deadline: collect", open_round(3, 3, 2, 2), two, 5000ms, {decision::collect, reason::collecting, 2}},
      {"before the deadline", open_round(3, 3, 2, 2), two_deadline, 999ms, {decision::collect, reason::collecting, 2}},
      {"nothing contributed", open_round(3, 3, 0, 2), two_deadline, 5000ms, {decision::collect, reason::collecting, 2}},
      {"deadline, 2 of 3",
       open_round(3, 3, 2, 2),
       two_deadline,
       1000ms,
       {decision::close, reason::deadline_with_majority, 2}},
      {"deadline, 1 of 3",
       open_round(3, 3, 1, 2),
       two_deadline,
       1000ms,
       {decision::collect, reason::deadline_without_majority, 2}},
      {"deadline, 2 of 4 is no majority",
       open_round(4, 4, 2, 2),
       two_deadline,
       3000ms,
       {decision::collect, reason::deadline_without_majority, 3}},
      {"deadline, 3 of 4",
       open_round(4, 4, 3, 2),
       two_deadline,
       3000ms,
       {decision::close, reason::deadline_with_majority, 3}},
      {"deadline, a majority under a published quorum of 4",
       open_round(5, 4, 3, 4),
       two_deadline,
       1000ms,
       {decision::collect, reason::deadline_without_majority, 4}},
      {"open round judged by participants, not members",
       open_round(1, 3, 2, 2),
       two_deadline,
       1000ms,
       {decision::close, reason::deadline_with_majority, 2}},
  };
  for (const auto& r : rows) {
    const auto got = decide(r.v, r.opt, t0 + r.since_first);
    EXPECT_EQ(got.what, r.expected.what) << r.name << ": " << to_string(got.what);
    EXPECT_EQ(got.why, r.expected.why) << r.name << ": " << to_string(got.why);
    EXPECT_EQ(got.needed, r.expected.needed) << r.name;
  }
}

TEST(QuorumPolicy, MembersSufficeOnlyWithAMembershipOfAQuorum) {
  const options two{2, 0ms};
  EXPECT_FALSE(members_suffice(view{}, two));
  EXPECT_FALSE(members_suffice(view{true, 1, 0, true, 3, 0, {}, {}}, two));
  EXPECT_TRUE(members_suffice(view{true, 2, 0, true, 3, 0, {}, {}}, two));
  EXPECT_TRUE(members_suffice(view{true, 1, 1, false, 0, 0, {}, {}}, two));
}

// The adaptive grace: median + k * MAD of the arrivals so far, clamped.
struct grace_row {
  const char* name;
  std::vector<std::chrono::milliseconds> arrivals;
  double k;
  std::chrono::milliseconds expected;
};

TEST(AdaptiveGrace, IsTheMedianPlusKSpreadsClamped) {
  const std::vector<grace_row> rows = {
      {"no arrivals: the floor", {}, 3, 200ms},
      {"all at once: the floor", {0ms, 0ms, 0ms}, 3, 200ms},
      {"close together", {0ms, 100ms, 200ms}, 3, 400ms},  // median 100, MAD 100
      {"k = 0 is the median", {0ms, 300ms, 600ms}, 0, 300ms},
      {"one outlier moves neither", {0ms, 100ms, 200ms, 300ms, 90000ms}, 1, 300ms},  // median 200, MAD 100
      {"even count: the middle two averaged", {0ms, 400ms, 600ms, 1000ms}, 1, 800ms},  // median 500, MAD 300
      {"the ceiling", {0ms, 20000ms, 40000ms}, 3, 30000ms},
      {"unsorted input", {600ms, 0ms, 300ms}, 1, 600ms},
  };
  for (const auto& r : rows) {
    std::vector<std::chrono::steady_clock::duration> in(r.arrivals.begin(), r.arrivals.end());
    EXPECT_EQ(grace_window(in, r.k, 200ms, 30000ms), r.expected) << r.name;
  }
}

TEST(AdaptiveGrace, ClosesAMajorityRoundOnceItsGracePassed) {
  options adaptive{2, 0ms};
  adaptive.adaptive = true;
  adaptive.grace_min = 200ms;
  adaptive.grace_max = 30000ms;
  auto round_with = [](std::size_t participants, std::vector<std::chrono::milliseconds> arrivals) {
    view v{true, participants, 2, true, participants, arrivals.size(), time_point{}, {}};
    v.arrivals.assign(arrivals.begin(), arrivals.end());
    if (arrivals.empty()) v.first_contribution.reset();
    return v;
  };
  const time_point t0{};
  struct adaptive_row {
    const char* name;
    view v;
    std::chrono::milliseconds now;
    decision what;
    reason why;
    std::optional<std::chrono::milliseconds> recheck;
  };
  const std::vector<adaptive_row> rows = {
      {"nothing yet", round_with(4, {}), 5000ms, decision::collect, reason::collecting, {}},
      {"2 of 4 is no majority, however long",
       round_with(4, {0ms, 10ms}),
       60000ms,
       decision::collect,
       reason::collecting,
       {}},
      {"3 of 4 within the grace", round_with(4, {0ms, 100ms, 200ms}), 300ms, decision::collect, reason::in_grace,
       400ms},
      {"3 of 4, grace passed",
       round_with(4, {0ms, 100ms, 200ms}),
       400ms,
       decision::close,
       reason::grace_with_majority,
       {}},
      {"3 of 4 together: the floor", round_with(4, {0ms, 0ms, 0ms}), 150ms, decision::collect, reason::in_grace, 200ms},
      {"3 of 4, a late majority is closed at once",
       round_with(4, {0ms, 0ms, 3000ms}),
       3000ms,
       decision::close,
       reason::grace_with_majority,
       {}},
      {"2 of 3 under a quorum of 2",
       round_with(3, {0ms, 50ms}),
       250ms,
       decision::close,
       reason::grace_with_majority,
       {}},
  };
  for (const auto& r : rows) {
    const auto got = decide(r.v, adaptive, t0 + r.now);
    EXPECT_EQ(got.what, r.what) << r.name << ": " << to_string(got.what);
    EXPECT_EQ(got.why, r.why) << r.name << ": " << to_string(got.why);
    if (r.recheck) {
      ASSERT_TRUE(got.recheck_at) << r.name;
      EXPECT_EQ(*got.recheck_at, t0 + *r.recheck) << r.name;
    } else {
      EXPECT_FALSE(got.recheck_at) << r.name;
    }
  }
}

TEST(AdaptiveGrace, AFixedDeadlineStillAppliesBeforeAMajority) {
  options both{2, 1000ms};
  both.adaptive = true;
  view v{true, 4, 2, true, 4, 2, time_point{}, {}};
  v.arrivals = {0ms, 10ms};
  // 2 of 4 is no majority: neither the grace nor the deadline closes the round.
  EXPECT_EQ(decide(v, both, time_point{} + 5000ms).why, reason::deadline_without_majority);
  // A majority in with a long grace (median 2 s + 3 x 2 s): the deadline, 1 s, comes first.
  view majority{true, 4, 2, true, 4, 3, time_point{}, {}};
  majority.arrivals = {0ms, 2000ms, 4000ms};
  EXPECT_EQ(decide(majority, both, time_point{} + 500ms).why, reason::in_grace);
  EXPECT_EQ(decide(majority, both, time_point{} + 1000ms).why, reason::deadline_with_majority);
}

struct required_row {
  std::size_t min_workers, live;
  bool tail;
  std::uint32_t expected;
};

TEST(QuorumPolicy, RequiredParticipantsShrinkOnlyInTheTail) {
  const std::vector<required_row> rows = {
      {2, 3, false, 2}, {2, 1, false, 2}, {2, 0, false, 2}, {3, 2, true, 2},
      {2, 5, true, 2},  {2, 0, true, 1},  {1, 1, true, 1},
  };
  for (const auto& r : rows)
    EXPECT_EQ(required_participants(r.min_workers, r.live, r.tail), r.expected)
        << r.min_workers << " " << r.live << " " << r.tail;
}

}  // namespace
}  // namespace atl::quorum
