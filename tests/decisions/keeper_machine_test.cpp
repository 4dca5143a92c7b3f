// The keeper's pure machine (actors/decisions/keeper_machine.hpp): each numbered edge of its
// diagram as a table.
#include <gtest/gtest.h>

#include "actors/decisions/keeper_machine.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

struct load_reply_row {
  const char* name;
  const char* sender;
  std::uint32_t fragment;
  keeper_machine::catch_up expected;
  std::size_t missing_after;
};

// Edges (1) to (3), in order on one replica of 3 fragments catching up from keeper/0.
TEST(KeeperMachine, ALoadReplyIsStoredOnceFromTheSourceAndRefusedFromAnyoneElse) {
  const load_reply_row rows[] = {
      {"(2) from a keeper that is not the source", "keeper/5", 0, keeper_machine::catch_up::refuse, 3},
      {"(1) from the source, a missing fragment", "keeper/0", 0, keeper_machine::catch_up::store_if_newer, 2},
      {"(3) the same answer again", "keeper/0", 0, keeper_machine::catch_up::ignore, 2},
      {"(3) a fragment the run has not", "keeper/0", 7, keeper_machine::catch_up::ignore, 2},
      {"(1) the next one", "keeper/0", 2, keeper_machine::catch_up::store_if_newer, 1},
  };
  keeper_machine m("keeper/0", 3);
  EXPECT_TRUE(m.is_replica());
  for (const auto& r : rows) {
    EXPECT_EQ(m.on_load_reply(r.sender, r.fragment), r.expected) << r.name;
    EXPECT_EQ(m.missing().size(), r.missing_after) << r.name;
  }
  EXPECT_FALSE(m.can_report_ready());
  m.committed(1, 4);  // (4): committed here is the newest
  EXPECT_TRUE(m.caught_up());
  EXPECT_TRUE(m.can_report_ready()) << "(5)";
}

// A replica of one keeper group catches up only the group's units, and reports (5) once it
// holds them; the run's other units are another group's.
TEST(KeeperMachine, AGroupsReplicaCatchesUpOnlyItsGroupsUnits) {
  keeper_machine m("keeper/1", 4, {1, 3, 9});  // unit 9 is not the run's
  EXPECT_EQ(m.missing(), (std::set<std::uint32_t>{1, 3}));
  EXPECT_EQ(m.fragments(), 4u) << "KeeperReady still names every unit of the run";
  EXPECT_EQ(m.on_load_reply("keeper/1", 0), keeper_machine::catch_up::ignore) << "another group's unit";
  EXPECT_EQ(m.on_load_reply("keeper/1", 1), keeper_machine::catch_up::store_if_newer);
  EXPECT_FALSE(m.can_report_ready());
  EXPECT_EQ(m.on_load_reply("keeper/1", 3), keeper_machine::catch_up::store_if_newer);
  EXPECT_TRUE(m.can_report_ready());
}

TEST(KeeperMachine, TheHeadsKeeperHasNothingToCatchUpAndNothingToReport) {
  keeper_machine m;
  EXPECT_FALSE(m.is_replica());
  EXPECT_TRUE(m.caught_up());
  EXPECT_FALSE(m.can_report_ready()) << "it holds no fragment count to report";
  EXPECT_EQ(m.on_load_reply("keeper/0", 0), keeper_machine::catch_up::refuse);
}

struct fence_row {
  const char* name;
  std::uint64_t raised_to;  // (6): a coordinator of this epoch loaded (0: none)
  std::optional<stored_round> stored;  // the store's newest round of fragment 0
  commit_identity commit;  // of fragment 0
  errc expected;
  std::uint64_t writer_epoch_after;
};

// Edges (6) and (7).
TEST(KeeperMachine, TheFenceRefusesACommitFromAnEpochOlderThanTheNewestWriterUnlessItRepeatsTheStoredRound) {
  const fence_row rows[] = {
      {"nothing stored, no writer yet", 0, std::nullopt, {0, 1, 3, 11}, errc::none, 0},
      {"the loading coordinator's epoch", 5, std::nullopt, {0, 1, 5, 11}, errc::none, 5},
      {"older than the loading coordinator", 5, std::nullopt, {0, 1, 4, 11}, errc::stale_epoch, 5},
      {"newer than the loading coordinator", 5, std::nullopt, {0, 1, 6, 11}, errc::none, 5},
      {"the store's epoch fences too (a restarted keeper)",
       0,
       stored_round{7, 6, 99},
       {0, 8, 4, 11},
       errc::stale_epoch,
       6},
      {"a retry of the stored round's bytes", 0, stored_round{7, 6, 99}, {0, 7, 4, 99}, errc::none, 6},
      {"the stored round with other bytes", 0, stored_round{7, 6, 99}, {0, 7, 4, 98}, errc::stale_epoch, 6},
      {"an older round with the stored digest", 0, stored_round{7, 6, 99}, {0, 6, 4, 99}, errc::stale_epoch, 6},
  };
  for (const auto& r : rows) {
    keeper_machine m;
    if (r.raised_to) m.coordinator_loading(0, r.raised_to);
    EXPECT_EQ(m.fence(r.commit, r.stored).code, r.expected) << r.name;
    EXPECT_EQ(m.writer_epoch(0), r.writer_epoch_after) << r.name;
    EXPECT_EQ(m.writer_epoch(1), 0u) << r.name << ": per fragment";
  }
}

// Edge (8): an acknowledged commit raises the fence for older writers.
TEST(KeeperMachine, ACommitRaisesTheFence) {
  keeper_machine m;
  m.committed(0, 9);
  EXPECT_EQ(m.fence({0, 3, 8, 1}, std::nullopt).code, errc::stale_epoch);
  m.committed(0, 2);
  EXPECT_EQ(m.writer_epoch(0), 9u) << "never lowered";
}

struct follow_row {
  const char* name;
  commit_identity record;
  std::optional<keeper_machine::followed_at> followed;
  bool queued;
  bool schedule;
};

// Edges (9) and (10), in order on one keeper.
TEST(KeeperMachine, AcknowledgedRecordsAreQueuedOnceAndTheFirstAsksForTheTimer) {
  const follow_row rows[] = {
      {"the first record", {0, 4, 2, 40}, keeper_machine::followed_at{3, 2}, true, true},
      {"another fragment's: the timer is on its way", {1, 4, 2, 41}, std::nullopt, true, false},
      {"a retry of a queued record", {0, 4, 2, 40}, keeper_machine::followed_at{3, 2}, false, false},
      {"a retry of the round the copy is at", {0, 3, 2, 30}, keeper_machine::followed_at{3, 2}, false, false},
      {"that round from a newer epoch (a re-placed coordinator)",
       {0, 3, 5, 30},
       keeper_machine::followed_at{3, 2},
       true,
       false},
  };
  keeper_machine m;
  for (const auto& r : rows) {
    bool schedule = true;
    EXPECT_EQ(m.acknowledged(r.record, r.followed, schedule), r.queued) << r.name;
    EXPECT_EQ(schedule, r.schedule) << r.name;
  }
  EXPECT_EQ(m.take_pending(false), 3u) << "read before the timer: everything queued, in order";
  bool schedule = false;
  EXPECT_TRUE(m.acknowledged({0, 5, 2, 50}, std::nullopt, schedule));
  EXPECT_FALSE(schedule) << "the first timer has not fired yet";
  EXPECT_EQ(m.take_pending(true), 1u);
  EXPECT_TRUE(m.acknowledged({0, 6, 2, 60}, std::nullopt, schedule));
  EXPECT_TRUE(schedule) << "after the timer, the next record asks for a new one";
}

// Edges (11) and (12).
TEST(KeeperMachine, OneSnapshotIsWrittenAtATime) {
  keeper_machine m;
  const keeper_machine::time_point t0{};
  EXPECT_TRUE(m.start_snapshot(t0));
  EXPECT_TRUE(m.snapshot_writing());
  EXPECT_FALSE(m.start_snapshot(t0 + 1s)) << "skipped while one is written";
  EXPECT_DOUBLE_EQ(m.finish_snapshot(t0 + 2500ms), 2.5);
  EXPECT_FALSE(m.snapshot_writing());
  EXPECT_TRUE(m.start_snapshot(t0 + 3s));
}

}  // namespace
}  // namespace atl
