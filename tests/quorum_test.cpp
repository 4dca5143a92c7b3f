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
  view one_member{true, 1, 0, false, 0, 0, {}};
  view two_members{true, 2, 0, false, 0, 0, {}};
  view empty_published_one{true, 0, 1, false, 0, 0, {}};
  view tail_one{true, 1, 1, false, 0, 0, {}};
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
  EXPECT_FALSE(members_suffice(view{true, 1, 0, true, 3, 0, {}}, two));
  EXPECT_TRUE(members_suffice(view{true, 2, 0, true, 3, 0, {}}, two));
  EXPECT_TRUE(members_suffice(view{true, 1, 1, false, 0, 0, {}}, two));
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
