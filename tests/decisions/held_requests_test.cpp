// actors/decisions/held_requests: each row names the reason its verdict follows from, and
// the facts that differ from a usual case, by name.
#include <gtest/gtest.h>

#include "actors/decisions/held_requests.hpp"

namespace atl::held_requests {
namespace {

// `facts` with `change` applied: a row says what differs from its usual case.
template <class Facts, class Change>
Facts but(Facts facts, Change change) {
  change(facts);
  return facts;
}

// The usual StateRequest: from a member and participant of the open round that has not
// contributed yet, the state loaded, enough members, DiLoCo.
state_request_facts participant_before_contributing() {
  state_request_facts f;
  f.loaded = f.members_suffice = f.collecting = f.nesterov = f.participant = f.member = true;
  f.participants = 3;
  return f;
}

TEST(HeldRequests, AStateRequestIsAnsweredOnlyWhenItsSenderCanUseTheStateNow) {
  struct row {
    const char* reason;
    state_request_facts facts;
    state_verdict expected;
  };
  using f = state_request_facts;
  const auto usual = participant_before_contributing();
  const row rows[] = {
      {"a participant that has not contributed", usual, state_verdict::answer_in_round},
      {"a participant that contributed waits for the next round", but(usual, [](f& x) { x.contributed = true; }),
       state_verdict::hold},
      {"not loaded yet", but(usual, [](f& x) { x.loaded = false; }), state_verdict::hold},
      {"too few members: a participant waits", but(usual, [](f& x) { x.members_suffice = false; }),
       state_verdict::hold},
      {"no round open", but(usual, [](f& x) { x.collecting = x.participant = false; }), state_verdict::hold},
      {"a member outside the open round must train to reach another fragment's",
       but(usual, [](f& x) { x.participant = false; }), state_verdict::answer_outside_round},
      {"outside the round, but refused as not_participant: no refusal loop",
       but(usual, [](f& x) { x.participant = false, x.left_out = true; }), state_verdict::hold},
      {"outside the round in ddp: waits", but(usual, [](f& x) { x.participant = x.nesterov = false; }),
       state_verdict::hold},
      {"not a member at all", but(usual, [](f& x) { x.participant = x.member = false; }), state_verdict::hold},
      {"a participant that starts past the open round: left out of it, held for the next",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = true; }), state_verdict::skip_and_hold},
      {"the same before the members suffice: the round goes on without it all the same",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = true, x.members_suffice = false; }),
       state_verdict::skip_and_hold},
      {"the open round's only participant skips it: answered in it (a round of nobody never closes)",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = true, x.participants = 1; }),
       state_verdict::answer_in_round},
      {"it skips the open round but contributed to it already: held as any contributor",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = x.contributed = true; }), state_verdict::hold},
      {"it skips the open round before the state is loaded: held",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = true, x.loaded = false; }),
       state_verdict::hold},
      {"a member outside the open round that skips it: the committed state is too old, held",
       but(usual, [](f& x) { x.skips_open_round = x.wants_newer_state = true, x.participant = false; }),
       state_verdict::hold},
      {"a participant that skips a later round than the open one: held for a newer state",
       but(usual, [](f& x) { x.wants_newer_state = true; }), state_verdict::hold},
      {"it skips a committed round (a repeat after the answer): answered as any participant",
       but(usual, [](f& x) { x.skips_open_round = false; }), state_verdict::answer_in_round},
  };
  for (const auto& r : rows) EXPECT_STREQ(to_string(decide(r.facts)), to_string(r.expected)) << r.reason;
}

// The usual early contribution: between rounds, for the round about to open, from a
// member, the state loaded and seeded, nobody held yet.
contribution_facts early_from_a_member() {
  contribution_facts f;
  f.loaded = f.seeded = f.ready = f.for_next_round = f.member = true;
  return f;
}

TEST(HeldRequests, AContributionIsHeldForTheRoundAboutToOpenOrUntilTheStateIsThere) {
  struct row {
    const char* reason;
    contribution_facts facts;
    contribution_verdict expected;
  };
  using f = contribution_facts;
  const auto usual = early_from_a_member();
  // A re-placed coordinator before the keeper answered: nothing loaded, seeded or ready.
  const auto unloaded = but(usual, [](f& x) { x.loaded = x.seeded = x.ready = x.for_next_round = false; });
  // A round is collecting; a participant that has not contributed names the round after it.
  const auto skipped = but(usual, [](f& x) {
    x.ready = x.for_next_round = false;
    x.collecting = x.for_round_after_open = x.participant = true;
    x.participants = 3;
  });
  // A round is collecting; a participant names the round before it, late work kept.
  const auto late = but(usual, [](f& x) {
    x.ready = x.for_next_round = false;
    x.collecting = x.for_round_before_open = x.participant = x.keep_late = true;
    x.participants = 3;
  });
  const row rows[] = {
      {"a round is collecting: the tracker fences it", but(usual, [](f& x) { x.ready = false; }),
       contribution_verdict::take},
      {"between rounds, for the next round, from a member", usual, contribution_verdict::hold_early},
      {"between rounds, for another round: refused by the tracker", but(usual, [](f& x) { x.for_next_round = false; }),
       contribution_verdict::take},
      {"between rounds, from a non-member", but(usual, [](f& x) { x.member = false; }), contribution_verdict::take},
      {"before the state is loaded (a re-placed coordinator), even from a non-member",
       but(unloaded, [](f& x) { x.member = false; }), contribution_verdict::hold_early},
      {"loaded but not seeded yet", but(unloaded, [](f& x) { x.loaded = true; }), contribution_verdict::hold_early},
      {"the held senders are at the bound", but(unloaded, [](f& x) { x.held = max_early; }),
       contribution_verdict::take},
      {"at the bound, a sender already held replaces its own",
       but(unloaded, [](f& x) { x.held = max_early, x.sender_held = true; }), contribution_verdict::hold_early},
      {"the round after the collecting one, from a participant that has not contributed: it skipped this round",
       skipped, contribution_verdict::skip_open_round},
      {"the same from a participant that contributed: the tracker refuses it",
       but(skipped, [](f& x) { x.contributed = true; }), contribution_verdict::take},
      {"the same from a non-participant: the tracker refuses it", but(skipped, [](f& x) { x.participant = false; }),
       contribution_verdict::take},
      {"the same from the round's only participant: dropping it would reopen the same round",
       but(skipped, [](f& x) { x.participants = 1; }), contribution_verdict::take},
      {"two rounds ahead: the tracker refuses it", but(skipped, [](f& x) { x.for_round_after_open = false; }),
       contribution_verdict::take},
      {"the held senders are at the bound: the tracker refuses it", but(skipped, [](f& x) { x.held = max_early; }),
       contribution_verdict::take},
      {"the round before the collecting one, from a participant: late work, to fold in", late,
       contribution_verdict::take_late},
      {"the same with diloco.late_work = drop: refused (wrong_round), the sender resyncs",
       but(late, [](f& x) { x.keep_late = false; }), contribution_verdict::take},
      {"the same from a non-participant: refused", but(late, [](f& x) { x.participant = false; }),
       contribution_verdict::take},
      {"no round collecting: refused", but(late, [](f& x) { x.collecting = false; }), contribution_verdict::take},
  };
  for (const auto& r : rows) EXPECT_STREQ(to_string(decide(r.facts)), to_string(r.expected)) << r.reason;
}

}  // namespace
}  // namespace atl::held_requests
