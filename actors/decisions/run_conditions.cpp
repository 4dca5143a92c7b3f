#include "actors/decisions/run_conditions.hpp"

#include <cstdio>

namespace atl {
namespace {

std::string count(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

run_condition training(const condition_facts& f) {
  switch (f.phase) {
    case run_phase::finished: return {"Training", false, "Finished", "the run finished"};
    case run_phase::waiting:
      return {"Training", false, "Waiting",
              count(f.live_workers, "worker", "workers") + " of the " + std::to_string(f.min_workers) +
                  " run.min_workers asks for"};
    case run_phase::training: break;
  }
  if (f.live_workers > 0 && f.workers_done == f.live_workers)
    return {"Training", false, "Finishing", "every worker finished; the last rounds are being reported"};
  return {"Training", true, "Training",
          count(f.live_workers - f.workers_done, "worker trains", "workers train") +
              (f.workers_done ? ", " + std::to_string(f.workers_done) + " finished" : "")};
}

run_condition degraded(const condition_facts& f) {
  if (f.phase != run_phase::training) return {"Degraded", false, "Healthy", ""};
  std::vector<std::pair<std::string, std::string>> found;  // reason, what
  if (f.fragments_unplaced)
    found.emplace_back("NoCoordinator",
                       count(f.fragments_unplaced, "fragment has", "fragments have") + " no coordinator placed");
  if (f.dead_members) found.emplace_back("MembersDead", count(f.dead_members, "member is", "members are") + " dead");
  if (f.keeper_slots_empty)
    found.emplace_back("OneCopy", std::to_string(f.keeper_slots_empty) + " of " + std::to_string(f.keeper_slots) +
                                      " keeper replica slots empty: committed rounds are on fewer machines than "
                                      "storage.keepers asks for");
  if (f.since_last_round_s && *f.since_last_round_s > f.stall_after_s) {
    char s[64];
    std::snprintf(s, sizeof s, "no round committed for %.0f s", *f.since_last_round_s);
    found.emplace_back("Stalled", s);
  }
  if (found.empty()) return {"Degraded", false, "Healthy", ""};
  std::string message;
  for (const auto& [reason, what] : found) message += (message.empty() ? "" : "; ") + what;
  return {"Degraded", true, found.front().first, message};
}

run_condition restarting(const condition_facts& f) {
  const bool new_restarts = f.since_worker_restart_s && *f.since_worker_restart_s <= f.restart_window_s;
  // Every member syncs until its first round: before one is committed that is the run starting.
  const bool returning = f.phase == run_phase::training && f.since_last_round_s && f.returning_members > 0;
  const std::string counts = count(static_cast<std::size_t>(f.worker_restarts), "worker restart", "worker restarts") +
                             ", " + count(f.dead_members, "member dead", "members dead") + ", " +
                             count(f.returning_members, "member joining", "members joining");
  if (returning) return {"Restarting", true, "MembersJoining", counts};
  if (new_restarts) return {"Restarting", true, "WorkersRestarted", counts};
  return {"Restarting", false, "Steady", counts};
}

}  // namespace

std::vector<run_condition> run_conditions(const condition_facts& f) {
  return {training(f), degraded(f), restarting(f),
          f.phase == run_phase::finished ? run_condition{"Finished", true, "Finished", "the run finished"}
                                         : run_condition{"Finished", false, "NotFinished", ""}};
}

}  // namespace atl
