// The coordinator's round machine (actors/decisions/round_collect.hpp): one table per
// numbered edge of its diagram; each row names its case, how the machine stands before
// the event, the event, and what the effects ask of the shell (every field, in order).
#include <gtest/gtest.h>

#include <functional>

#include "actors/decisions/round_collect.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;
using effects = round_collect::effects;

const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
constexpr std::uint64_t epoch = 3;

round_collect::held note(const std::string& what) { return std::make_shared<const std::string>(what); }
std::string what_of(const round_collect::held& h) { return *std::static_pointer_cast<const std::string>(h); }

// Every field of the effects, in the order the shell runs them.
std::string describe(const effects& fx) {
  std::string s;
  for (const auto& n : fx.notes) s += "note(" + n + ") ";
  if (fx.opened) s += "opened ";
  for (const auto& [worker, digest] : fx.answer) s += "answer(" + worker + ":" + std::to_string(digest) + ") ";
  if (fx.arm_deadline) s += "deadline(" + std::to_string(*fx.arm_deadline) + ") ";
  if (fx.recheck)
    s += "recheck(" + std::to_string(fx.recheck->first) + " at +" +
         std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(fx.recheck->second - t0).count()) +
         "ms) ";
  if (fx.refused) s += std::string("refused(") + to_string(fx.refused->code) + ") ";
  if (fx.taken_as) s += "taken(" + *fx.taken_as + ") ";
  if (fx.send_missed_result) s += "missed_result ";
  if (fx.complete) s += "complete ";
  for (const auto& h : fx.replay) s += "replay(" + what_of(h) + ") ";
  if (!s.empty()) s.pop_back();
  return s;
}

// A coordinator whose fragment (4 values) has committed round 5.
struct world {
  round_tracker tracker{0, outer_options{}};
  round_collect machine;
  explicit world(round_collect::options opt) : machine(tracker, std::move(opt)) {
    EXPECT_FALSE(tracker.restore(5, std::vector<float>(4, 1.f), std::vector<float>(4, 0.f)));
  }
  // The members (and the quorum the registry published with them), the state loaded.
  void start(std::vector<std::string> members, std::size_t quorum = 0) {
    machine.membership({epoch, std::move(members), quorum});
    machine.loaded(false);
  }
  // The same, and round 6 open with them.
  void open_with(std::vector<std::string> members) {
    start(std::move(members));
    EXPECT_TRUE(machine.advance().opened);
  }
  // Round 6 of a, b and c closed at its deadline without c, committed, and round 7 open.
  void close_six_without_c() {
    open_with({"a", "b", "c"});
    contribute("a");
    contribute("b");
    ASSERT_TRUE(machine.deadline(6, t0 + 2s).complete);
    ASSERT_FALSE(tracker.committed());
    EXPECT_TRUE(machine.advance().opened);
  }
  effects contribute(const std::string& worker, std::uint64_t round = 6, std::chrono::milliseconds at = 0ms) {
    round_collect::contribution_values v;
    v.epoch = epoch;
    v.weight = 1;
    v.decoded = std::vector<float>(4, 0.5f);
    return machine.take(worker, round, std::move(v), false, t0 + at);
  }
  effects late(const std::string& worker, std::uint64_t round = 5) {
    round_collect::contribution_values v;
    v.epoch = epoch;
    v.weight = 1;
    v.decoded = std::vector<float>(4, 0.5f);
    return machine.take(worker, round, std::move(v), true, t0);
  }
};

round_collect::options plain() {
  round_collect::options opt;
  opt.quorum.min_workers = 1;
  return opt;
}
round_collect::options with_deadline() {
  auto opt = plain();
  opt.quorum.round_deadline = 1000ms;
  return opt;
}
round_collect::options adaptive() {
  auto opt = plain();
  opt.quorum.adaptive = true;
  opt.quorum.grace_min = 200ms;
  opt.quorum.grace_max = 200ms;
  return opt;
}
round_collect::options needing_three() {
  auto opt = plain();
  opt.quorum.min_workers = 3;
  return opt;
}
round_collect::options keeping_late_work() {
  auto opt = with_deadline();
  opt.keep_late_work = true;
  return opt;
}

struct row {
  const char* name;
  round_collect::options options;
  std::function<void(world&)> before;
  std::function<effects(world&)> event;
  const char* expected;
};

void run(const std::vector<row>& rows) {
  for (const auto& r : rows) {
    world w(r.options);
    r.before(w);
    EXPECT_EQ(describe(r.event(w)), r.expected) << r.name;
  }
}

TEST(RoundCollect, Edge1StartsWithTheFirstMembershipAndLoadsBeforeAnyRound) {
  world w(plain());
  EXPECT_EQ(w.machine.started_as(), round_collect::startup::asking_members);
  EXPECT_EQ(describe(w.machine.advance()), "") << "no Membership: no round";
  w.machine.membership({epoch, {"a"}, 0});
  EXPECT_EQ(w.machine.started_as(), round_collect::startup::loading);
  EXPECT_EQ(w.machine.epoch(), epoch);
  EXPECT_EQ(describe(w.machine.members_changed(t0)), "") << "a tracker that is ready, but nothing loaded";
  w.machine.loaded(false);
  EXPECT_EQ(w.machine.started_as(), round_collect::startup::started);
  EXPECT_EQ(describe(w.machine.advance()), "opened");
}

TEST(RoundCollect, Edge1MembersThatLeaveAreDroppedFromTheOpenRound) {
  run({
      {"a participant left after the other contributed: the round completes", plain(),
       [](world& w) {
         w.open_with({"a", "b"});
         w.contribute("a");
         w.machine.membership({epoch + 1, {"a"}, 0});
       },
       [](world& w) { return w.machine.members_changed(t0); }, "note(b left; round 6 goes on without it) complete"},
      {"a participant left before anyone contributed: the round goes on", plain(),
       [](world& w) {
         w.open_with({"a", "b"});
         w.machine.membership({epoch + 1, {"a"}, 0});
       },
       [](world& w) { return w.machine.members_changed(t0); }, "note(b left; round 6 goes on without it)"},
      {"a member joined: the open round keeps its participants", plain(),
       [](world& w) {
         w.open_with({"a"});
         w.machine.membership({epoch + 1, {"a", "c"}, 0});
       },
       [](world& w) { return w.machine.members_changed(t0); }, ""},
      {"adaptive: one left, the rest a majority past its grace: closed", adaptive(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
         w.contribute("b");
         w.machine.membership({epoch + 1, {"a", "b"}, 0});
       },
       [](world& w) { return w.machine.members_changed(t0 + 1s); },
       "note(c left; round 6 goes on without it) complete"},
  });
}

TEST(RoundCollect, Edge3OpensTheNextRoundWithTheMembersAndAnswersWhatWasHeld) {
  run({
      {"too few members for run.min_workers: no round", needing_three(),
       [](world& w) {
         w.start({"a", "b"});
       },
       [](world& w) { return w.machine.advance(); }, ""},
      {"the published quorum counts, not run.min_workers", needing_three(),
       [](world& w) {
         w.start({"a", "b"}, 2);
       },
       [](world& w) { return w.machine.advance(); }, "opened"},
      {"a held request of a participant is answered with its digest; a stranger's stays held", plain(),
       [](world& w) {
         w.start({"a"});
         w.machine.request({"a", 0, 77, 0, note("req a")});
         w.machine.request({"x", 0, 0, 0, note("req x")});
       },
       [](world& w) { return w.machine.advance(); }, "opened answer(a:77)"},
      {"resumed: every member not held is told the state (digest 0)", plain(),
       [](world& w) {
         w.machine.membership({epoch, {"a", "b"}, 0});
         w.machine.request({"a", 0, 77, 0, note("req a")});
         w.machine.loaded(true);
       },
       [](world& w) { return w.machine.advance(); }, "opened answer(a:77) answer(b:0)"},
      {"contributions held for the round are replayed, by sender", plain(),
       [](world& w) {
         w.machine.membership({epoch, {"a", "b"}, 0});
         (void)w.machine.admit({"b", 6, note("contribution b")});
         (void)w.machine.admit({"a", 6, note("contribution a")});
         w.machine.loaded(false);
       },
       [](world& w) { return w.machine.advance(); }, "opened replay(contribution a) replay(contribution b)"},
      {"a round open already: nothing", plain(), [](world& w) { w.open_with({"a"}); },
       [](world& w) { return w.machine.advance(); }, ""},
  });
}

TEST(RoundCollect, Edge4HoldsOrSkipsAContributionTheOpenRoundCannotTake) {
  using verdict = held_requests::contribution_verdict;
  struct admit_row {
    const char* name;
    std::function<void(world&)> before;
    round_collect::contribution event;
    verdict expected_verdict;
    const char* expected;
  };
  const std::vector<admit_row> rows = {
      {"before the state is loaded: held",
       [](world& w) {
         w.machine.membership({epoch, {"a"}, 0});
       },
       {"a", 6, note("c")},
       verdict::hold_early,
       ""},
      {"a participant that sent the round after the open one: the round goes on without it",
       [](world& w) {
         w.open_with({"a", "b"});
         w.contribute("b");
       },
       {"a", 7, note("c")},
       verdict::skip_open_round,
       "note(a sent round 7 without round 6; round 6 goes on without it) complete"},
      {"the round's only participant sent the next round: taken (the tracker refuses it)",
       [](world& w) { w.open_with({"a"}); },
       {"a", 7, note("c")},
       verdict::take,
       ""},
      {"a contribution to the open round: taken",
       [](world& w) { w.open_with({"a"}); },
       {"a", 6, note("c")},
       verdict::take,
       ""},
  };
  for (const auto& r : rows) {
    world w(plain());
    r.before(w);
    auto a = w.machine.admit(r.event);
    EXPECT_EQ(held_requests::to_string(a.verdict), std::string(held_requests::to_string(r.expected_verdict))) << r.name;
    EXPECT_EQ(describe(a.then), r.expected) << r.name;
  }
}

TEST(RoundCollect, Edge5TakesAContributionAndSaysWhenTheRoundIsComplete) {
  run({
      {"the first of two: taken, and the round's deadline starts", with_deadline(),
       [](world& w) {
         w.open_with({"a", "b"});
       },
       [](world& w) { return w.contribute("a"); }, "deadline(6) taken(a)"},
      {"without a deadline none is armed", plain(),
       [](world& w) {
         w.open_with({"a", "b"});
       },
       [](world& w) { return w.contribute("a"); }, "taken(a)"},
      {"the last one: complete", with_deadline(),
       [](world& w) {
         w.open_with({"a", "b"});
         w.contribute("a");
       },
       [](world& w) { return w.contribute("b"); }, "taken(b) complete"},
      {"from a member outside the round: refused, and left out of it", plain(),
       [](world& w) {
         w.open_with({"a"});
         w.machine.membership({epoch, {"a", "c"}, 0});
       },
       [](world& w) { return w.contribute("c"); }, "refused(not_participant)"},
      {"the wrong round: refused", plain(),
       [](world& w) {
         w.open_with({"a", "b"});
       },
       [](world& w) { return w.contribute("a", 9); }, "refused(wrong_round)"},
      {"adaptive: the second of three waits for the grace's end", adaptive(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
       },
       [](world& w) { return w.contribute("b", 6, 100ms); }, "recheck(6 at +200ms) taken(b)"},
      {"late work: folded in as its late name, and its sender gets the result it missed", keeping_late_work(),
       [](world& w) { w.close_six_without_c(); }, [](world& w) { return w.late("c", 6); },
       "taken(c#late) missed_result"},
      {"late work sent again: only the result it missed, again", keeping_late_work(),
       [](world& w) {
         w.close_six_without_c();
         w.late("c", 6);
       },
       [](world& w) { return w.late("c", 6); }, "missed_result"},
  });
}

TEST(RoundCollect, Edge5AContributorRefusedAsNotParticipantIsHeldNotAnsweredOutsideTheRound) {
  world w(plain());
  w.open_with({"a"});
  w.machine.membership({epoch, {"a", "c"}, 0});
  (void)w.contribute("c");
  const auto a = w.machine.request({"c", 0, 0, 0, note("req c")});
  EXPECT_TRUE(a.held) << "answered outside the round, it would contribute and be refused again";
}

TEST(RoundCollect, Edge6AnswersOrHoldsAStateRequest) {
  struct request_row {
    const char* name;
    std::function<void(world&)> before;
    round_collect::state_request event;
    bool expected_held;
    const char* expected;
  };
  const std::vector<request_row> rows = {
      {"a participant that has not contributed: answered with its digest",
       [](world& w) {
         w.open_with({"a", "b"});
       },
       {"a", 0, 42, 0, note("r")},
       false,
       "answer(a:42)"},
      {"a member outside the open round: answered (it must train to reach another fragment's)",
       [](world& w) {
         w.open_with({"a"});
         w.machine.membership({epoch, {"a", "c"}, 0});
       },
       {"c", 0, 0, 0, note("r")},
       false,
       "answer(c:0)"},
      {"a participant that contributed: held for the next round",
       [](world& w) {
         w.open_with({"a", "b"});
         w.contribute("a");
       },
       {"a", 0, 0, 0, note("r")},
       true,
       ""},
      {"a participant that skips the open round: left out of it, held; the rest contributed: complete",
       [](world& w) {
         w.open_with({"a", "b"});
         w.contribute("b");
       },
       {"a", 6, 0, 0, note("r")},
       true,
       "note(a starts past round 6; round 6 goes on without it) complete"},
      {"before any Membership: held", [](world&) {}, {"a", 0, 0, 1, note("r")}, true, ""},
  };
  for (const auto& r : rows) {
    world w(plain());
    r.before(w);
    auto a = w.machine.request(r.event);
    EXPECT_EQ(a.held, r.expected_held) << r.name;
    EXPECT_EQ(describe(a.then), r.expected) << r.name;
  }
}

TEST(RoundCollect, Edge6KeepsOneHeldRequestPerWorkerAndTheOneWithParameters) {
  world w(plain());
  (void)w.machine.request({"rank0", 0, 0, 1, note("with parameters")});
  (void)w.machine.request({"rank0", 0, 0, 0, note("without")});
  ASSERT_EQ(w.machine.waiting().size(), 1u);
  EXPECT_EQ(what_of(w.machine.waiting()[0].message), "with parameters");
  EXPECT_TRUE(w.machine.holds_parameters());
  (void)w.machine.request({"rank0", 0, 0, 1, note("again with parameters")});
  EXPECT_EQ(what_of(w.machine.waiting()[0].message), "again with parameters");
}

TEST(RoundCollect, Edge7ClosesAtTheDeadlineOrTheGraceOnlyWithAMajority) {
  run({
      {"deadline, two of three contributed: closed", with_deadline(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
         w.contribute("b");
       },
       [](world& w) { return w.machine.deadline(6, t0 + 2s); },
       "note(round 6 closed (deadline passed with a quorum and a majority) with 2 of 3 participants) complete"},
      {"deadline, one of three: looked at again a deadline later", with_deadline(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
       },
       [](world& w) { return w.machine.deadline(6, t0 + 2s); }, "deadline(6)"},
      {"the deadline of a round that completed: nothing (no timer left behind)", with_deadline(),
       [](world& w) {
         w.open_with({"a"});
         w.contribute("a");
       },
       [](world& w) { return w.machine.deadline(6, t0 + 2s); }, ""},
      {"the deadline of an earlier round while the next one collects: nothing", with_deadline(),
       [](world& w) {
         w.open_with({"a", "b"});
       },
       [](world& w) { return w.machine.deadline(4, t0 + 2s); }, ""},
      {"grace not over yet: looked at again at its end", adaptive(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
         w.contribute("b");
       },
       [](world& w) { return w.machine.grace(6, t0 + 100ms); }, "recheck(6 at +200ms)"},
      {"grace over with a majority: closed", adaptive(),
       [](world& w) {
         w.open_with({"a", "b", "c"});
         w.contribute("a");
         w.contribute("b");
       },
       [](world& w) { return w.machine.grace(6, t0 + 300ms); },
       "note(round 6 closed (adaptive grace passed with a quorum and a majority) with 2 of 3 participants) complete"},
  });
}

}  // namespace
}  // namespace atl
