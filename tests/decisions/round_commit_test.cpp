// The committing round's machine (actors/decisions/round_commit.hpp): one table row per
// path through each numbered edge of its diagram, and what every step asks the shell to do.
#include <gtest/gtest.h>

#include "actors/decisions/round_commit.hpp"

namespace atl {
namespace {

using answer = round_commit::answer;
using effects = round_commit::effects;
using namespace std::chrono_literals;

const auto t0 = std::chrono::steady_clock::time_point{} + 1h;

effects nothing() { return {}; }
effects send(std::vector<std::string> keepers) { return {std::move(keepers), false, false}; }
effects provisional() { return {{}, true, false}; }
effects committed() { return {{}, false, true}; }

std::string describe(const effects& e) {
  std::string s = "send to {";
  for (const auto& k : e.send_to) s += k + " ";
  return s + "} provisional " + std::to_string(e.send_provisional) + " committed " + std::to_string(e.committed);
}

// One event given to a machine committing round 7 to keeper/0 and keeper/1 since t0.
struct step {
  enum class kind { answer, keepers, tick } what;
  std::string keeper;  // answer: from
  std::uint64_t round = 7;  // answer: about
  answer said = answer::writing;
  std::vector<std::string> keepers;  // keepers: the new set
  std::chrono::milliseconds after{0};  // tick: this long after t0
  effects expected;
};

step from(const char* keeper, answer said, effects expected, std::uint64_t round = 7) {
  return {step::kind::answer, keeper, round, said, {}, {}, std::move(expected)};
}
step keepers_now(std::vector<std::string> keepers, effects expected) {
  return {step::kind::keepers, "", 7, answer::writing, std::move(keepers), {}, std::move(expected)};
}
step tick_at(std::chrono::milliseconds after, effects expected) {
  return {step::kind::tick, "", 7, answer::writing, {}, after, std::move(expected)};
}

struct row {
  const char* name;
  int edge;
  bool early_results;
  std::vector<step> steps;
  bool committed_after;
  round_commit::results settles_as;
};

TEST(RoundCommit, EachEdgeAsksForWhatItsDiagramSays) {
  using results = round_commit::results;
  const std::vector<row> rows = {
      {"both keepers writing: the result goes out provisional at the second",
       2,
       true,
       {from("keeper/0", answer::writing, nothing()), from("keeper/1", answer::writing, provisional())},
       false,
       results::provisional},
      {"without early results, writing notices ask for nothing",
       2,
       false,
       {from("keeper/0", answer::writing, nothing()), from("keeper/1", answer::writing, nothing())},
       false,
       results::unsent},
      {"an acknowledgement counts as having the request",
       2,
       true,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::writing, provisional())},
       false,
       results::provisional},
      {"the provisional result goes once",
       2,
       true,
       {from("keeper/0", answer::writing, nothing()), from("keeper/1", answer::writing, provisional()),
        from("keeper/1", answer::writing, nothing()), keepers_now({"keeper/0", "keeper/1"}, nothing())},
       false,
       results::provisional},
      {"a keeper behind is sent the full state once, then acknowledges",
       3,
       false,
       {from("keeper/1", answer::behind, send({"keeper/1"})), from("keeper/1", answer::behind, nothing()),
        from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed())},
       true,
       results::unsent},
      {"both keepers acknowledge: committed at the second",
       4,
       true,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed())},
       true,
       results::unsent},
      {"a duplicate acknowledgement asks for nothing more",
       4,
       false,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed()),
        from("keeper/1", answer::acknowledged, nothing())},
       true,
       results::unsent},
      {"provisional, then committed",
       4,
       true,
       {from("keeper/0", answer::writing, nothing()), from("keeper/1", answer::writing, provisional()),
        from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed())},
       true,
       results::provisional},
      {"a refusal asks for nothing",
       5,
       true,
       {from("keeper/0", answer::refused, nothing()), from("keeper/1", answer::acknowledged, nothing())},
       false,
       results::unsent},
      {"answers about another round ask for nothing",
       5,
       true,
       {from("keeper/0", answer::acknowledged, nothing(), 6), from("keeper/1", answer::writing, nothing(), 8),
        from("keeper/1", answer::behind, nothing(), 6)},
       false,
       results::unsent},
      {"a keeper outside the set is not counted",
       5,
       true,
       {from("keeper/9", answer::acknowledged, nothing()), from("keeper/9", answer::behind, nothing()),
        from("keeper/0", answer::acknowledged, nothing())},
       false,
       results::unsent},
      {"the keeper still writing removed: committed",
       6,
       true,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::writing, provisional()),
        keepers_now({"keeper/0"}, committed())},
       true,
       results::provisional},
      {"the keeper not writing removed: the result goes out provisional",
       6,
       true,
       {from("keeper/0", answer::writing, nothing()), keepers_now({"keeper/0"}, provisional())},
       false,
       results::provisional},
      {"a keeper added holds the round up, and is asked at the next retry",
       6,
       false,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed()),
        keepers_now({"keeper/0", "keeper/1", "keeper/2"}, nothing()), tick_at(999ms, nothing()),
        tick_at(1000ms, send({"keeper/2"})), from("keeper/2", answer::acknowledged, committed())},
       true,
       results::unsent},
      {"unacknowledged for the retry interval: sent again to those that did not acknowledge",
       7,
       false,
       {from("keeper/0", answer::acknowledged, nothing()), tick_at(999ms, nothing()),
        tick_at(1000ms, send({"keeper/1"})), tick_at(2999ms, nothing()), tick_at(3000ms, send({"keeper/1"}))},
       false,
       results::unsent},
      {"a refused round is sent again when due, behind keepers included",
       7,
       false,
       {from("keeper/0", answer::refused, nothing()), from("keeper/1", answer::behind, send({"keeper/1"})),
        tick_at(1000ms, send({"keeper/0", "keeper/1"}))},
       false,
       results::unsent},
      {"nothing is sent again once committed",
       7,
       false,
       {from("keeper/0", answer::acknowledged, nothing()), from("keeper/1", answer::acknowledged, committed()),
        tick_at(1h, nothing())},
       true,
       results::unsent},
  };
  for (const auto& r : rows) {
    const auto label = std::string("edge (") + std::to_string(r.edge) + "): " + r.name;
    round_commit machine({"keeper/0", "keeper/1"});
    EXPECT_EQ(machine.start(7, 0, r.early_results, t0), send({"keeper/0", "keeper/1"})) << label;  // (1)
    int n = 0;
    for (const auto& s : r.steps) {
      effects got;
      switch (s.what) {
        case step::kind::answer: got = machine.on_answer(s.keeper, s.round, s.said); break;
        case step::kind::keepers: got = machine.set_keepers(s.keepers); break;
        case step::kind::tick: got = machine.tick(t0 + s.after, 1000ms); break;
      }
      EXPECT_EQ(got, s.expected) << label << ", step " << n << ": got " << describe(got) << ", expected "
                                 << describe(s.expected);
      n++;
    }
    EXPECT_EQ(machine.committed(), r.committed_after) << label;
    EXPECT_EQ(machine.settle(), r.settles_as) << label;  // (8)
    EXPECT_FALSE(machine.committing()) << label;
  }
}

TEST(RoundCommit, StartAsksEveryKeeperAndAStartedRoundForgetsTheLastOnesAnswers) {
  round_commit machine({"keeper/0", "keeper/1"});
  EXPECT_FALSE(machine.committing());
  EXPECT_EQ(machine.start(3, 0, true, t0), send({"keeper/0", "keeper/1"}));
  EXPECT_TRUE(machine.committing());
  EXPECT_EQ(machine.round(), 3u);
  EXPECT_EQ(machine.tries(), 1);
  EXPECT_EQ(machine.on_answer("keeper/0", 3, answer::writing), nothing());
  EXPECT_EQ(machine.on_answer("keeper/1", 3, answer::behind), send({"keeper/1"}));
  EXPECT_EQ(machine.on_answer("keeper/1", 3, answer::writing), provisional());
  EXPECT_EQ(machine.settle(), round_commit::results::provisional);

  EXPECT_EQ(machine.start(4, 0, true, t0), send({"keeper/0", "keeper/1"}));
  EXPECT_FALSE(machine.needs_full_state("keeper/1"));
  EXPECT_FALSE(machine.every_keeper_has_it());
  EXPECT_EQ(machine.tries(), 1);
  EXPECT_EQ(machine.on_answer("keeper/0", 4, answer::writing), nothing());
  EXPECT_EQ(machine.on_answer("keeper/1", 4, answer::writing), provisional()) << "the last round's went, not this";
}

TEST(RoundCommit, IdleAsksForNothing) {
  round_commit machine({"keeper/0"});
  EXPECT_EQ(machine.on_answer("keeper/0", 1, answer::acknowledged), nothing());
  EXPECT_EQ(machine.on_answer("keeper/0", 1, answer::behind), nothing());
  EXPECT_EQ(machine.set_keepers({"keeper/1"}), nothing());
  EXPECT_EQ(machine.tick(t0 + 1h, 1000ms), nothing());
  EXPECT_FALSE(machine.committed());

  EXPECT_EQ(machine.start(1, 0, false, t0), send({"keeper/1"}));
  EXPECT_EQ(machine.on_answer("keeper/1", 1, answer::acknowledged), committed());
  EXPECT_EQ(machine.settle(), round_commit::results::unsent);
  EXPECT_EQ(machine.on_answer("keeper/1", 1, answer::acknowledged), nothing()) << "a settled round";
  EXPECT_EQ(machine.tick(t0 + 1h, 1000ms), nothing());
}

TEST(RoundCommit, RetriesBackOffAndWaitForTheBytesOnASlowLink) {
  // commit_retry_after itself: tests/decisions/coordinator_retry_test.cpp.
  round_commit machine({"keeper/0"});
  (void)machine.start(2, 8'000'000, false, t0);  // one second of bytes at the floor rate
  EXPECT_EQ(machine.tick(t0 + 1999ms, 1000ms), nothing());
  EXPECT_EQ(machine.tick(t0 + 2000ms, 1000ms), send({"keeper/0"}));  // try 2: twice the base
  EXPECT_EQ(machine.tick(t0 + 4999ms, 1000ms), nothing());
  EXPECT_EQ(machine.tick(t0 + 5000ms, 1000ms), send({"keeper/0"}));
  EXPECT_EQ(machine.tries(), 3);
}

}  // namespace
}  // namespace atl
