#include "actors/decisions/run_phase.hpp"

namespace atl {

const char* to_string(run_step s) {
  switch (s) {
    case run_step::stay: return "stay";
    case run_step::start: return "start";
    case run_step::wait_for_reports: return "wait_for_reports";
    case run_step::finish: return "finish";
    case run_step::restart_clock: return "restart_clock";
  }
  return "unknown";
}

run_step decide_run_step(const run_facts& f) {
  switch (f.phase) {
    case run_phase::waiting: return f.live_workers >= f.min_workers ? run_step::start : run_step::stay;
    case run_phase::finished: return run_step::stay;
    case run_phase::training: break;
  }
  if (f.live_training > 0) return run_step::restart_clock;
  if (!f.any_finished) return run_step::stay;
  const bool grace_passed = f.all_done_for && *f.all_done_for >= unreported_round_grace;
  if (f.committed_round_unreported && !grace_passed) return run_step::wait_for_reports;
  return run_step::finish;
}

}  // namespace atl
