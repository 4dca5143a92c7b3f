// actors/decisions/held_requests: each row names the reason its verdict follows from.
#include <gtest/gtest.h>

#include "actors/decisions/held_requests.hpp"

namespace atl::held_requests {
namespace {

TEST(HeldRequests, AStateRequestIsAnsweredOnlyWhenItsSenderCanUseTheStateNow) {
  struct row {
    const char* reason;
    state_request_facts facts;
    state_verdict expected;
  };
  // loaded, members_suffice, collecting, nesterov, participant, contributed, member, refused_outside
  const row rows[] = {
      {"a participant that has not contributed",
       {true, true, true, true, true, false, true, false},
       state_verdict::answer_in_round},
      {"a participant that contributed waits for the next round",
       {true, true, true, true, true, true, true, false},
       state_verdict::hold},
      {"not loaded yet", {false, true, true, true, true, false, true, false}, state_verdict::hold},
      {"too few members: a participant waits",
       {true, false, true, true, true, false, true, false},
       state_verdict::hold},
      {"no round open", {true, true, false, true, false, false, true, false}, state_verdict::hold},
      {"a member outside the open round must train to reach another fragment's",
       {true, true, true, true, false, false, true, false},
       state_verdict::answer_outside_round},
      {"outside the round, but refused as not_participant: no refusal loop",
       {true, true, true, true, false, false, true, true},
       state_verdict::hold},
      {"outside the round in ddp: waits", {true, true, true, false, false, false, true, false}, state_verdict::hold},
      {"not a member at all", {true, true, true, true, false, false, false, false}, state_verdict::hold},
      {"a member outside the round before the state is loaded",
       {false, true, true, true, false, false, true, false},
       state_verdict::hold},
  };
  for (const auto& r : rows) EXPECT_STREQ(to_string(decide(r.facts)), to_string(r.expected)) << r.reason;
}

TEST(HeldRequests, AContributionIsHeldForTheRoundAboutToOpenOrUntilTheStateIsThere) {
  struct row {
    const char* reason;
    contribution_facts facts;
    contribution_verdict expected;
  };
  // loaded, seeded, ready, for_next_round, member, sender_held, held
  const row rows[] = {
      {"a round is collecting: the tracker fences it",
       {true, true, false, true, true, false, 0},
       contribution_verdict::take},
      {"between rounds, for the next round, from a member",
       {true, true, true, true, true, false, 0},
       contribution_verdict::hold_early},
      {"between rounds, for another round: refused by the tracker",
       {true, true, true, false, true, false, 0},
       contribution_verdict::take},
      {"between rounds, from a non-member", {true, true, true, true, false, false, 0}, contribution_verdict::take},
      {"before the state is loaded (a re-placed coordinator)",
       {false, false, false, false, false, false, 0},
       contribution_verdict::hold_early},
      {"loaded but not seeded yet", {true, false, false, false, true, false, 0}, contribution_verdict::hold_early},
      {"the held senders are at the bound",
       {false, false, false, false, true, false, max_early},
       contribution_verdict::take},
      {"at the bound, a sender already held replaces its own",
       {false, false, false, false, true, true, max_early},
       contribution_verdict::hold_early},
  };
  for (const auto& r : rows) EXPECT_STREQ(to_string(decide(r.facts)), to_string(r.expected)) << r.reason;
}

}  // namespace
}  // namespace atl::held_requests
