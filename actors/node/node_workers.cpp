// The node's workers (actors/node/node_workers.hpp): spawned with the run's configuration,
// watched, and restarted within their budget.
#include "actors/node/node_workers.hpp"

#include <caf/all.hpp>

#include "actors/node/node_messages.hpp"
#include "actors/shared/messages.hpp"
#include "actors/worker/worker.hpp"
#include "runtime/process/log.hpp"

namespace atl::node_workers {

void spawn(self_ptr self, std::size_t index) {
  auto& st = self->state;
  auto& w = st.workers[index];
  worker_config wc;
  wc.id = w.id;
  wc.cluster_id = st.mail->cluster();
  wc.spec = w.spec;
  wc.run = st.run;
  if (w.spec.device == "cpu" && st.cfg.apply_threads) {
    wc.thread_layouts = st.cpu_worker_layouts;
    wc.apply_threads = st.cfg.apply_threads;
    wc.keep_threads = [agent = caf::actor_cast<caf::actor>(self)](const thread_layout& kept) {
      caf::anon_send(agent, threads_atom::value, kept.torch, kept.blas);
    };
  }
  wc.keep_done = [agent = caf::actor_cast<caf::actor>(self), index](const worker_done_report& report) {
    caf::anon_send(agent, done_atom::value, static_cast<std::uint64_t>(index), report);
  };
  try {
    w.handle = st.cfg.detached_workers ? self->spawn<caf::detached>(worker_actor, st.net, wc, st.cfg.factory)
                                       : self->spawn(worker_actor, st.net, wc, st.cfg.factory);
  } catch (const std::exception& e) {  // a worker whose replica cannot be built
    log_error(w.id + ": cannot start: " + e.what());
  }
  if (!w.handle) return;
  self->monitor(w.handle);
  st.local->add(w.id, w.handle);
}

down_outcome on_down(self_ptr self, const caf::down_msg& down) {
  auto& st = self->state;
  for (std::size_t i = 0; i < st.workers.size(); ++i) {
    auto& w = st.workers[i];
    if (!w.handle || w.handle.address() != down.source) continue;
    st.local->remove(w.id);
    w.handle = nullptr;
    if (!down.reason) {
      w.finished = true;
      continue;
    }
    const auto verdict = w.budget.on_failure(self->clock().now());
    if (st.current == node_agent_state::phase::running && verdict.restart) {
      log_warn(w.id + " failed (" + self->system().render(down.reason) + "); restart " +
               std::to_string(verdict.recent) + " of " + std::to_string(st.run.restart_limit) + " within " +
               std::to_string(st.run.restart_window_ms) + " ms, in " + std::to_string(verdict.delay.count()) + " ms");
      st.worker_restarts++;
      self->delayed_send(self, verdict.delay, restart_atom::value, static_cast<std::uint64_t>(i));
      return {};
    }
    return {down_outcome::give_up,
            make_error(errc::not_ready, w.id + " failed (" + self->system().render(down.reason) + ") after " +
                                            std::to_string(verdict.recent) + " restarts within " +
                                            std::to_string(st.run.restart_window_ms) + " ms; giving up")};
  }
  bool all_finished = !st.workers.empty();
  for (const auto& w : st.workers) all_finished = all_finished && w.finished;
  return {all_finished ? down_outcome::every_worker_finished : down_outcome::nothing, {}};
}

}  // namespace atl::node_workers
