// The commit barrier: each row is a sequence of keeper answers and what each calls for.
#include <gtest/gtest.h>

#include "actors/decisions/commit_barrier.hpp"

namespace atl {
namespace {

using answer = commit_barrier::answer;
using action = commit_barrier::action;
using namespace std::chrono_literals;

struct step {
  const char* keeper;
  std::uint64_t round;
  answer what;
  action expected;
};

struct row {
  const char* name;
  std::vector<step> steps;
  bool committed;
  bool every_keeper_has_it;
};

TEST(CommitBarrier, EachAnswerCallsForWhatItsReasonSays) {
  const std::vector<row> rows = {
      {"both keepers acknowledge: committed at the second",
       {{"keeper/0", 7, answer::acknowledged, action::none}, {"keeper/1", 7, answer::acknowledged, action::committed}},
       true,
       true},
      {"writing notices: early results once both have the request",
       {{"keeper/0", 7, answer::writing, action::none}, {"keeper/1", 7, answer::writing, action::early_results}},
       false,
       true},
      {"an acknowledgement counts as having the request",
       {{"keeper/0", 7, answer::acknowledged, action::none}, {"keeper/1", 7, answer::writing, action::early_results}},
       false,
       true},
      {"a keeper behind is sent the full state once, then acknowledges",
       {{"keeper/1", 7, answer::behind, action::send_full_state},
        {"keeper/1", 7, answer::behind, action::none},
        {"keeper/0", 7, answer::acknowledged, action::none},
        {"keeper/1", 7, answer::acknowledged, action::committed}},
       true,
       true},
      {"a refusal changes nothing",
       {{"keeper/0", 7, answer::refused, action::none}, {"keeper/1", 7, answer::acknowledged, action::none}},
       false,
       false},
      {"answers about another round change nothing",
       {{"keeper/0", 6, answer::acknowledged, action::none}, {"keeper/1", 8, answer::writing, action::none}},
       false,
       false},
      {"a keeper outside the set is not counted",
       {{"keeper/9", 7, answer::acknowledged, action::none},
        {"keeper/9", 7, answer::behind, action::none},
        {"keeper/0", 7, answer::acknowledged, action::none}},
       false,
       false},
      {"a duplicate acknowledgement calls for nothing more",
       {{"keeper/0", 7, answer::acknowledged, action::none},
        {"keeper/1", 7, answer::acknowledged, action::committed},
        {"keeper/1", 7, answer::acknowledged, action::none}},
       true,
       true},
  };
  for (const auto& r : rows) {
    commit_barrier barrier({"keeper/0", "keeper/1"});
    barrier.start(7, 0);
    for (const auto& s : r.steps)
      EXPECT_EQ(to_string(barrier.on_answer(s.keeper, s.round, s.what)), std::string(to_string(s.expected)))
          << r.name << ": " << s.keeper;
    EXPECT_EQ(barrier.committed(), r.committed) << r.name;
    EXPECT_EQ(barrier.every_keeper_has_it(), r.every_keeper_has_it) << r.name;
  }
}

TEST(CommitBarrier, AKeeperRemovedNoLongerHoldsTheRoundUpAndOneAddedIsAsked) {
  commit_barrier barrier({"keeper/0", "keeper/1"});
  barrier.start(3, 0);
  EXPECT_EQ(barrier.on_answer("keeper/0", 3, answer::acknowledged), action::none);
  barrier.set_keepers({"keeper/0"});  // keeper/1's node died
  EXPECT_TRUE(barrier.committed());
  barrier.set_keepers({"keeper/0", "keeper/2"});  // a replica placed anew
  EXPECT_FALSE(barrier.committed());
  EXPECT_EQ(barrier.unacknowledged(), std::vector<std::string>{"keeper/2"});
  EXPECT_EQ(barrier.on_answer("keeper/2", 3, answer::acknowledged), action::committed);
}

TEST(CommitBarrier, NothingIsCommittedOrDueOutsideARoundAndAFinishedRoundIgnoresAnswers) {
  commit_barrier barrier({"keeper/0"});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  EXPECT_FALSE(barrier.committed());
  EXPECT_FALSE(barrier.retry_due(t0, 1000ms));
  barrier.start(1, 0);
  barrier.sent(t0);
  EXPECT_EQ(barrier.on_answer("keeper/0", 1, answer::acknowledged), action::committed);
  barrier.finish();
  EXPECT_EQ(barrier.on_answer("keeper/0", 1, answer::acknowledged), action::none);
  EXPECT_FALSE(barrier.retry_due(t0 + 1h, 1000ms));
}

TEST(CommitBarrier, RetriesBackOffAndWaitForTheBytesOnASlowLink) {
  // commit_retry_after itself: tests/coordinator_retry_test.cpp.
  commit_barrier barrier({"keeper/0"});
  const auto t0 = std::chrono::steady_clock::time_point{} + 1h;
  barrier.start(2, 8'000'000);  // one second of bytes at the floor rate
  barrier.sent(t0);
  EXPECT_FALSE(barrier.retry_due(t0 + 1999ms, 1000ms));
  EXPECT_TRUE(barrier.retry_due(t0 + 2000ms, 1000ms));
  barrier.sent(t0 + 2000ms);  // try 2: twice the base
  EXPECT_FALSE(barrier.retry_due(t0 + 4999ms, 1000ms));
  EXPECT_TRUE(barrier.retry_due(t0 + 5000ms, 1000ms));
  EXPECT_EQ(barrier.tries(), 2);
}

}  // namespace
}  // namespace atl
