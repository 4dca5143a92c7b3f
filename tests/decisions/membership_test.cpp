// actors/decisions/membership: every (state, event) pair of the node lifecycle, and the run's.
#include <gtest/gtest.h>

#include "actors/decisions/membership.hpp"

namespace atl {
namespace {

using S = member_state;
using E = member_event;

struct row {
  S from;
  E event;
  std::optional<S> to;  // nullopt: refused
  errc refusal = errc::none;
};

TEST(Membership, EveryTransitionOfTheNodeLifecycle) {
  const std::vector<row> rows = {
      {S::joining, E::heartbeat, S::syncing},
      {S::syncing, E::heartbeat, S::syncing},
      {S::active, E::heartbeat, S::active},
      {S::draining, E::heartbeat, S::draining},
      {S::left, E::heartbeat, {}, errc::stale_epoch},
      {S::dead, E::heartbeat, {}, errc::stale_epoch},

      {S::joining, E::synced, {}, errc::not_ready},
      {S::syncing, E::synced, S::active},
      {S::active, E::synced, {}, errc::not_ready},
      {S::dead, E::synced, {}, errc::not_ready},

      {S::joining, E::drain, S::draining},
      {S::syncing, E::drain, S::draining},
      {S::active, E::drain, S::draining},
      {S::draining, E::drain, {}, errc::not_ready},
      {S::left, E::drain, {}, errc::not_ready},
      {S::dead, E::drain, {}, errc::not_ready},

      {S::joining, E::goodbye, S::left},
      {S::active, E::goodbye, S::left},
      {S::draining, E::goodbye, S::left},
      {S::left, E::goodbye, {}, errc::not_ready},
      {S::dead, E::goodbye, {}, errc::not_ready},

      {S::syncing, E::lease_expired, S::dead},
      {S::active, E::lease_expired, S::dead},
      {S::draining, E::lease_expired, S::left},
      {S::dead, E::lease_expired, {}, errc::not_ready},
      {S::active, E::lease_expired_done, S::left},
      {S::draining, E::lease_expired_done, S::left},
      {S::left, E::lease_expired_done, {}, errc::not_ready},

      {S::joining, E::rejoin, S::joining},
      {S::active, E::rejoin, S::active},
      {S::draining, E::rejoin, S::joining},
      {S::left, E::rejoin, S::joining},
      {S::dead, E::rejoin, S::joining},
  };
  for (const auto& r : rows) {
    const auto got = next_state(r.from, r.event);
    const std::string name = std::string(to_string(r.from)) + " --" + to_string(r.event) + "-->";
    if (r.to) {
      ASSERT_TRUE(got) << name << " refused: " << got.err().describe();
      EXPECT_EQ(*got, *r.to) << name << " " << to_string(*got);
    } else {
      ASSERT_FALSE(got) << name << " allowed: " << to_string(*got);
      EXPECT_EQ(got.err().code, r.refusal) << name;
      EXPECT_NE(got.err().message.find(to_string(r.from)), std::string::npos) << name << " " << got.err().message;
    }
  }
}

TEST(Membership, WhoTakesPartAndWhoHosts) {
  for (const auto s : {S::joining, S::syncing, S::active}) {
    EXPECT_TRUE(takes_part(s)) << to_string(s);
    EXPECT_TRUE(hosts_placed(s)) << to_string(s);
  }
  EXPECT_FALSE(takes_part(S::draining));
  EXPECT_TRUE(hosts_placed(S::draining));
  for (const auto s : {S::left, S::dead}) {
    EXPECT_FALSE(takes_part(s)) << to_string(s);
    EXPECT_FALSE(hosts_placed(s)) << to_string(s);
  }
}

TEST(Membership, StoredStatesKeepTheirFormatAndComeBackAsJoining) {
  EXPECT_STREQ(stored_member_state(S::syncing), "active");
  EXPECT_STREQ(stored_member_state(S::dead), "dead");
  for (const auto s : {S::joining, S::syncing, S::active, S::draining, S::left, S::dead}) {
    const auto back = parse_stored_member_state(stored_member_state(s));
    ASSERT_TRUE(back);
    EXPECT_EQ(*back, takes_part(s) ? S::joining : s);
  }
  const auto bad = parse_stored_member_state("zombie");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.err().code, errc::storage_failure);
}

TEST(Membership, TheRunOnlyMovesForward) {
  using P = run_phase;
  struct phase_row {
    P from, to;
    bool allowed;
  };
  const std::vector<phase_row> rows = {
      {P::waiting, P::training, true},  {P::training, P::finished, true},  {P::waiting, P::finished, false},
      {P::training, P::waiting, false}, {P::finished, P::training, false}, {P::training, P::training, false},
  };
  for (const auto& r : rows) {
    const auto got = next_phase(r.from, r.to);
    EXPECT_EQ(static_cast<bool>(got), r.allowed) << to_string(r.from) << " -> " << to_string(r.to);
    if (!got) {
      EXPECT_EQ(got.err().code, errc::unexpected_message);
    }
  }
  for (const auto p : {P::waiting, P::training, P::finished}) EXPECT_EQ(*parse_run_phase(to_string(p)), p);
  EXPECT_EQ(parse_run_phase("running").err().code, errc::storage_failure);
}

}  // namespace
}  // namespace atl
