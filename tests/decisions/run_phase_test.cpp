// The run's phase (actors/decisions/run_phase.hpp): each edge of its diagram as table rows.
#include "actors/decisions/run_phase.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

using namespace std::chrono_literals;

struct run_row {
  const char* name;
  run_facts facts;
  run_step expected;
};

run_facts facts(run_phase phase, std::size_t live, std::size_t training, bool any_finished = false,
                bool unreported = false, std::optional<std::chrono::steady_clock::duration> all_done_for = {}) {
  run_facts f;
  f.phase = phase;
  f.min_workers = 2;
  f.live_workers = live;
  f.live_training = training;
  f.any_finished = any_finished;
  f.committed_round_unreported = unreported;
  f.all_done_for = all_done_for;
  return f;
}

TEST(RunPhase, TheRunStartsWithItsMinimumOfWorkersAndFinishesOnceEveryMergedRoundIsReported) {
  const auto w = run_phase::waiting, t = run_phase::training, f = run_phase::finished;
  const run_row rows[] = {
      {"(1) waiting, fewer live workers than run.min_workers", facts(w, 1, 1), run_step::stay},
      {"(1) waiting, the minimum joined", facts(w, 2, 2), run_step::start},
      {"(1) waiting, more than the minimum", facts(w, 5, 5), run_step::start},
      {"(5) training, a live worker still trains", facts(t, 2, 1, true), run_step::restart_clock},
      {"training, nobody live and nobody finished (every node died)", facts(t, 0, 0, false), run_step::stay},
      {"(4) every live worker finished, every round reported", facts(t, 2, 0, true), run_step::finish},
      {"(4) the finished nodes left; nobody live", facts(t, 0, 0, true), run_step::finish},
      {"(3) a merged round unreported, seen now", facts(t, 2, 0, true, true), run_step::wait_for_reports},
      {"(3) unreported, within the grace", facts(t, 2, 0, true, true, 4s), run_step::wait_for_reports},
      {"(4) unreported, the grace passed", facts(t, 2, 0, true, true, unreported_round_grace), run_step::finish},
      {"finished stays, whatever comes", facts(f, 2, 2), run_step::stay},
  };
  for (const auto& r : rows)
    EXPECT_EQ(decide_run_step(r.facts), r.expected) << r.name << ": " << to_string(decide_run_step(r.facts));
}

}  // namespace
}  // namespace atl
