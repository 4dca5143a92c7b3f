// The run's phase applied (actors/registry/phase.hpp): what actors/decisions/run_phase.hpp
// decides from what the registry knows now.
#include "actors/registry/phase.hpp"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "actors/decisions/run_phase.hpp"
#include "actors/registry/cursor.hpp"
#include "actors/registry/placements.hpp"
#include "actors/registry/queries.hpp"
#include "actors/registry/views.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

using json = nlohmann::json;

void set_run_phase(self_ptr self, run_phase to) {
  auto& st = self->state;
  const auto next = next_phase(st.phase, to);
  if (!next) return log_error("registry: " + next.err().describe());
  log_info(std::string("registry: run ") + to_string(st.phase) + " -> " + to_string(*next));
  st.phase = *next;
  persist(self);
}

// A round that may be committed and whose RoundReport has not come: one some worker merged
// (it acked it), or one its coordinator's progress says is committed (its round, open or
// committing, is past the next), or any while a placed coordinator has not said where it is
// (a head that restarted lost what was in its mailbox: a report among it is sent again). The
// report travels from the coordinator's node on its own link and may arrive after the
// WorkerDone; and a round whose result no worker merged (lost, and the workers' steps ran
// out first) still trained on its contributions' data, which the data cursor must learn
// from its report. The seeded fault tier found the last two (a report lost with a head).
bool a_committed_round_is_unreported(const registry_state& st) {
  for (const auto& f : st.fragments) {
    for (const auto& [worker, acked] : f.worker_digests)
      if (acked.first > f.round) return true;
    if (!f.placed_on.empty() && !f.progress) return true;
    if (f.progress && f.progress->round > f.round + 1) return true;
  }
  return false;
}

void start_training(self_ptr self) {
  auto& st = self->state;
  set_run_phase(self, run_phase::training);
  apply_coordinator_moves(self, placement::place_coordinators(st.fragments.size(), node_facts(st)), false);
  place_replica_keepers(self);
}

void finish_run(self_ptr self) {
  auto& st = self->state;
  data_run_finished(self);
  set_run_phase(self, run_phase::finished);
  // Nodes whose workers finished may still be up, hosting a keeper replica until now
  // (actors/node/node_agent.cpp): every node still there stops.
  stop_every_node(self, run_finished_reason);
  const auto finished =
      std::count_if(st.workers.begin(), st.workers.end(), [](const auto& w) { return w.second.done; });
  json summary = {{"val_loss", st.last_val_loss},
                  {"wall_s", std::chrono::duration<double>(st.now() - st.started).count()},
                  {"workers", finished}};
  if (const auto* c = st.deps.counters) {  // what the head's link carried, in and out (relayed: both ways)
    summary["head_link_bytes"] = c->bytes_in.load() + c->bytes_relayed.load() + c->bytes_out.load();
    summary["head_relayed_bytes"] = c->bytes_relayed.load();
    summary["head_relayed_tensor_bytes"] = c->tensor_bytes_relayed.load();
    // Tensors the head's own actors took in or sent (its keeper's commits and loads).
    summary["head_tensor_bytes"] = c->tensor_bytes_in.load() + c->tensor_bytes_out.load();
    summary["head_link_by_kind"] = views::head_link_by_kind(*c);
  }
  st.metrics.write("summary", summary);
}

}  // namespace

void update_run_phase(self_ptr self) {
  auto& st = self->state;
  run_facts facts;
  facts.phase = st.phase;
  facts.min_workers = static_cast<std::size_t>(std::max<std::int64_t>(0, st.cfg.min_workers));
  const auto live = live_workers(st);
  facts.live_workers = live.size();
  facts.live_training = static_cast<std::size_t>(std::count_if(live.begin(), live.end(), [&](const std::string& w) {
    auto it = st.workers.find(w);
    return it == st.workers.end() || !it->second.done;
  }));
  facts.any_finished = any_worker_done(st);
  facts.committed_round_unreported = a_committed_round_is_unreported(st);
  if (st.workers_done_at) facts.all_done_for = st.now() - *st.workers_done_at;
  switch (decide_run_step(facts)) {
    case run_step::stay: return;
    case run_step::start: return start_training(self);
    case run_step::restart_clock: st.workers_done_at.reset(); return;
    case run_step::wait_for_reports:
      if (!st.workers_done_at) st.workers_done_at = st.now();
      return;
    case run_step::finish: return finish_run(self);
  }
}

}  // namespace atl::registry_detail
