// judge_liveness: a lease that passes, a closed connection not answered in time, and the
// cases that must stay alive (a reconnect answered, confirmation off, a slow but
// connected node).
#include "actors/decisions/liveness.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

using ms = std::chrono::milliseconds;

TEST(Liveness, EachCaseGetsItsVerdict) {
  struct row {
    const char* name;
    liveness_facts facts;
    liveness_verdict expected;
  };
  const row rows[] = {
      {"heard from recently", {ms(300), std::nullopt, ms(20000), ms(500)}, liveness_verdict::alive},
      {"silent but connected (SIGSTOP, a busy CPU)",
       {ms(19999), std::nullopt, ms(20000), ms(500)},
       liveness_verdict::alive},
      {"the lease passed", {ms(20000), std::nullopt, ms(20000), ms(500)}, liveness_verdict::lease_expired},
      {"closed, still within confirm", {ms(900), ms(499), ms(20000), ms(500)}, liveness_verdict::alive},
      {"closed and unanswered for confirm", {ms(1000), ms(500), ms(20000), ms(500)}, liveness_verdict::connection_lost},
      {"closed, confirmation off", {ms(5000), ms(4000), ms(20000), ms(0)}, liveness_verdict::alive},
      {"closed and the lease passed too", {ms(20000), ms(600), ms(20000), ms(500)}, liveness_verdict::lease_expired},
  };
  for (const auto& r : rows) EXPECT_EQ(judge_liveness(r.facts), r.expected) << r.name;
}

TEST(Liveness, VerdictsHaveNames) {
  EXPECT_STREQ(to_string(liveness_verdict::connection_lost), "connection_lost");
  EXPECT_STREQ(to_string(liveness_verdict::lease_expired), "lease_expired");
  EXPECT_STREQ(to_string(liveness_verdict::alive), "alive");
}

}  // namespace
}  // namespace atl
