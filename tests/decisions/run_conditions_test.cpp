// The run's conditions (actors/decisions/run_conditions.hpp), table-driven: each row the
// facts and the four conditions' status and reason.
#include <gtest/gtest.h>

#include "actors/decisions/run_conditions.hpp"

namespace atl {
namespace {

condition_facts training_well() {
  condition_facts f;
  f.phase = run_phase::training;
  f.min_workers = 2;
  f.live_workers = 4;
  f.fragments = 4;
  f.keeper_slots = 4;
  f.since_last_round_s = 3;
  f.worker_restarts = 0;
  return f;
}

TEST(RunConditions, EachRowOfFactsGivesItsFourConditions) {
  struct row {
    const char* name;
    void (*change)(condition_facts&);
    bool training, degraded, restarting, finished;
    const char *training_reason, *degraded_reason, *restarting_reason;
  };
  const row rows[] = {
      {"training, nothing wrong", [](condition_facts&) {}, true, false, false, false, "Training", "Healthy", "Steady"},
      {"waiting for workers",
       [](condition_facts& f) {
         f.phase = run_phase::waiting;
         f.live_workers = 1;
       },
       false, false, false, false, "Waiting", "Healthy", "Steady"},
      {"every worker done, reports on their way", [](condition_facts& f) { f.workers_done = 4; }, false, false, false,
       false, "Finishing", "Healthy", "Steady"},
      {"finished",
       [](condition_facts& f) {
         f.phase = run_phase::finished;
         f.dead_members = 1;  // no longer matters
       },
       false, false, false, true, "Finished", "Healthy", "Steady"},
      {"a member dead", [](condition_facts& f) { f.dead_members = 1; }, true, true, false, false, "Training",
       "MembersDead", "Steady"},
      {"a fragment without its coordinator, and a member dead",
       [](condition_facts& f) {
         f.fragments_unplaced = 1;
         f.dead_members = 1;
       },
       true, true, false, false, "Training", "NoCoordinator", "Steady"},
      {"a keeper replica slot empty", [](condition_facts& f) { f.keeper_slots_empty = 1; }, true, true, false, false,
       "Training", "OneCopy", "Steady"},
      {"no round for longer than the stall bound", [](condition_facts& f) { f.since_last_round_s = 61; }, true, true,
       false, false, "Training", "Stalled", "Steady"},
      {"no round yet is not a stall", [](condition_facts& f) { f.since_last_round_s.reset(); }, true, false, false,
       false, "Training", "Healthy", "Steady"},
      {"a member joining while training", [](condition_facts& f) { f.returning_members = 1; }, true, false, true, false,
       "Training", "Healthy", "MembersJoining"},
      {"a worker restarted within the window",
       [](condition_facts& f) {
         f.worker_restarts = 2;
         f.since_worker_restart_s = 5;
       },
       true, false, true, false, "Training", "Healthy", "WorkersRestarted"},
      {"a worker restart long ago",
       [](condition_facts& f) {
         f.worker_restarts = 2;
         f.since_worker_restart_s = 500;
       },
       true, false, false, false, "Training", "Healthy", "Steady"},
      {"members syncing before the first round are the run starting",
       [](condition_facts& f) {
         f.returning_members = 4;
         f.since_last_round_s.reset();
       },
       true, false, false, false, "Training", "Healthy", "Steady"},
      {"members joining before training are not restarting",
       [](condition_facts& f) {
         f.phase = run_phase::waiting;
         f.returning_members = 3;
       },
       false, false, false, false, "Waiting", "Healthy", "Steady"},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto f = training_well();
    r.change(f);
    const auto c = run_conditions(f);
    ASSERT_EQ(c.size(), 4u);
    EXPECT_EQ(c[0].type, "Training");
    EXPECT_EQ(c[1].type, "Degraded");
    EXPECT_EQ(c[2].type, "Restarting");
    EXPECT_EQ(c[3].type, "Finished");
    EXPECT_EQ(c[0].status, r.training);
    EXPECT_EQ(c[1].status, r.degraded);
    EXPECT_EQ(c[2].status, r.restarting);
    EXPECT_EQ(c[3].status, r.finished);
    EXPECT_EQ(c[0].reason, r.training_reason);
    EXPECT_EQ(c[1].reason, r.degraded_reason);
    EXPECT_EQ(c[2].reason, r.restarting_reason);
  }
}

TEST(RunConditions, ADegradedMessageNamesEveryCauseAndRestartingCountsThem) {
  auto f = training_well();
  f.fragments_unplaced = 2;
  f.dead_members = 1;
  f.keeper_slots_empty = 1;
  f.worker_restarts = 3;
  f.since_worker_restart_s = 1;
  const auto c = run_conditions(f);
  EXPECT_EQ(c[1].message,
            "2 fragments have no coordinator placed; 1 member is dead; 1 of 4 keeper replica slots empty: committed "
            "rounds are on fewer machines than storage.keepers asks for");
  EXPECT_EQ(c[2].message, "3 worker restarts, 1 member dead, 0 members joining");
}

}  // namespace
}  // namespace atl
