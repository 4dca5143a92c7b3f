#include "actors/worker.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "runtime/digest.hpp"
#include "runtime/log.hpp"

namespace atl {
namespace {

using self_ptr = caf::stateful_actor<worker_state>*;
using phase = worker_state::phase;
using clock_type = std::chrono::steady_clock;

std::string coordinator_of(std::size_t fragment) { return "coord/" + std::to_string(fragment); }

// "coord/7" -> 7; anything else -> SIZE_MAX (senders are untrusted text).
std::size_t fragment_of(const std::string& sender) {
  if (sender.rfind("coord/", 0) != 0 || sender.size() == 6 || sender.size() > 12) return SIZE_MAX;
  std::size_t f = 0;
  for (std::size_t i = 6; i < sender.size(); ++i) {
    if (sender[i] < '0' || sender[i] > '9') return SIZE_MAX;
    f = f * 10 + static_cast<std::size_t>(sender[i] - '0');
  }
  return f;
}

bool any_pending(const worker_state& st) {
  for (bool p : st.pending)
    if (p) return true;
  return false;
}

void request_state(self_ptr self, std::size_t f) {
  auto& st = self->state;
  wire::outgoing out;
  out.envelope.initStateRequest().setFragment(static_cast<std::uint32_t>(f));
  // Our own parameters travel along: a fresh run is seeded from the first request.
  std::vector<float> local(st.model->fragment_size(f));
  st.model->read_fragment(f, local.data());
  out.tensors.push_back(wire::tensor::from_floats(local.data(), local.size()));
  st.pending[f] = true;
  st.mail->send(coordinator_of(f), st.epoch, out);
}

// Held-out loss of theta_global (every fragment swapped in, then swapped back).
float evaluate_global(worker_state& st) {
  std::vector<std::vector<float>> local(st.theta_global.size());
  for (std::size_t f = 0; f < local.size(); ++f) {
    local[f].resize(st.model->fragment_size(f));
    st.model->read_fragment(f, local[f].data());
    st.model->write_fragment(f, st.theta_global[f].data());
  }
  const float loss = st.model->evaluate();
  for (std::size_t f = 0; f < local.size(); ++f) st.model->write_fragment(f, local[f].data());
  return loss;
}

void report_progress(self_ptr self) {
  auto& st = self->state;
  const double dt = std::chrono::duration<double>(clock_type::now() - st.report_time).count();
  wire::outgoing out;
  auto p = out.envelope.initProgress();
  p.setStep(static_cast<std::uint64_t>(st.step));
  p.setLoss(st.last_loss);
  p.setTokensPerSec(dt > 0 ? static_cast<float>(st.tokens_since_report / dt) : 0.0f);
  p.setBytesSent(st.mail->bytes_sent());
  p.setBytesReceived(st.bytes_received);
  st.mail->send(st.cfg.registry, st.epoch, out);
  st.tokens_since_report = 0;
  st.report_time = clock_type::now();
}

void finish(self_ptr self) {
  auto& st = self->state;
  st.current = phase::finished;
  const float val = st.cfg.spec.rank == 0 ? evaluate_global(st) : -1.0f;
  const double wall = std::chrono::duration<double>(clock_type::now() - st.started).count();
  wire::outgoing out;
  auto d = out.envelope.initWorkerDone();
  d.setSteps(static_cast<std::uint64_t>(st.step));
  d.setFinalLoss(st.last_loss);
  d.setValLoss(val);
  d.setTokensPerSec(wall > 0 ? static_cast<float>(st.tokens_total / wall) : 0.0f);
  d.setWallSeconds(static_cast<float>(wall));
  d.setBytesReceived(st.bytes_received);
  d.setBytesSent(st.mail->bytes_sent());
  st.mail->send(st.cfg.registry, st.epoch, out);
  log_info(st.cfg.id + ": finished " + std::to_string(st.step) + " steps");
  self->quit();
}

void contribute(self_ptr self, std::size_t f) {
  auto& st = self->state;
  const auto n = st.theta_global[f].size();
  std::vector<float> delta(n);
  st.model->read_fragment(f, delta.data());
  for (std::size_t i = 0; i < n; ++i) delta[i] = st.theta_global[f][i] - delta[i];
  wire::outgoing out;
  auto c = out.envelope.initContribution();
  c.setFragment(static_cast<std::uint32_t>(f));
  c.setRound(st.round[f] + 1);
  c.setWeight(1.0f);
  c.setStep(static_cast<std::uint64_t>(st.step));
  out.tensors.push_back(wire::tensor::from_floats(delta.data(), n));
  st.pending[f] = true;
  st.mail->send(coordinator_of(f), st.epoch, out);
}

void on_step(self_ptr self) {
  auto& st = self->state;
  if (st.current != phase::training) return;
  if (st.cfg.spec.rank == 0 && st.step > 0 && st.step % st.cfg.run.eval_every == 0 && st.step != st.last_eval_step &&
      st.step < st.cfg.run.steps) {
    st.last_eval_step = st.step;
    wire::outgoing out;
    auto e = out.envelope.initEvalReport();
    e.setStep(static_cast<std::uint64_t>(st.step));
    e.setValLoss(evaluate_global(st));
    st.mail->send(st.cfg.registry, st.epoch, out);
  }
  if (st.step >= st.cfg.run.steps) {
    finish(self);
    return;
  }
  const auto result = st.model->train_step(st.step);
  st.step++;
  st.last_loss = result.loss;
  st.tokens_since_report += result.tokens;
  st.tokens_total += result.tokens;
  if (st.step % st.cfg.run.log_every == 0) report_progress(self);
  for (std::size_t f = 0; f < st.theta_global.size(); ++f)
    if (st.schedule->syncs_at(static_cast<std::int64_t>(f), st.step)) contribute(self, f);
  if (any_pending(st)) st.current = phase::awaiting;
  else self->send(self, step_atom::value);
}

// FragmentState and RoundResult both hand us theta_global of a fragment at a round.
void on_global(self_ptr self, const wire::message_ptr& msg, std::uint32_t f, std::uint64_t round, bool is_result) {
  auto& st = self->state;
  if (f >= st.theta_global.size() || msg->tensors().size() != 1 ||
      msg->tensors()[0].data.size() != st.model->fragment_size(f) * sizeof(float)) {
    st.mail->refuse(*msg, make_error(errc::tensor_mismatch, "fragment " + std::to_string(f)), st.epoch);
    return;
  }
  if (!st.pending[f]) return;  // a duplicate: already applied
  st.theta_global[f] = msg->tensors()[0].to_floats();
  st.model->write_fragment(f, st.theta_global[f].data());  // tau = 0, alpha = 0: replace
  st.round[f] = round;
  st.epoch = msg->epoch();
  st.pending[f] = false;
  if (is_result) {
    wire::outgoing out;
    auto ack = out.envelope.initRoundAck();
    ack.setFragment(f);
    ack.setRound(round);
    ack.setDigest(digest64(st.theta_global[f].data(), st.theta_global[f].size() * sizeof(float)));
    st.mail->send(msg->sender(), st.epoch, out);
  } else if (st.current == phase::syncing && st.step == 0 && round > 0) {
    // Joining a run in progress: continue the schedule where the fragment stands.
    st.step = static_cast<std::int64_t>(round) * st.schedule->sync_every();
  }
  if (!any_pending(st) && st.current != phase::training) {
    st.current = phase::training;
    self->send(self, step_atom::value);
  }
}

}  // namespace

const char* to_string(worker_state::phase p) {
  switch (p) {
    case phase::syncing: return "syncing";
    case phase::training: return "training";
    case phase::awaiting: return "awaiting";
    case phase::finished: return "finished";
  }
  return "unknown";
}

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory) {
  auto& st = self->state;
  st.cfg = cfg;
  st.mail = std::make_unique<mailer>(*net, cfg.id, cfg.cluster_id);
  st.model = factory(cfg.run, cfg.spec);  // may throw: the node agent sees the failure and restarts
  st.schedule = std::make_unique<fragment_schedule>(cfg.run.sync_every, cfg.run.fragments);
  const auto fragments = st.model->fragment_count();
  st.theta_global.resize(fragments);
  st.round.assign(fragments, 0);
  st.pending.assign(fragments, false);
  st.started = st.report_time = clock_type::now();
  for (std::size_t f = 0; f < fragments; ++f) request_state(self, f);
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        st.bytes_received += msg->wire_bytes();
        const auto env = msg->envelope();
        if (env.isFragmentState()) {
          on_global(self, msg, env.getFragmentState().getFragment(), env.getFragmentState().getRound(), false);
        } else if (env.isRoundResult()) {
          on_global(self, msg, env.getRoundResult().getFragment(), env.getRoundResult().getRound(), true);
        } else if (env.isRefusal()) {
          log_warn(st.cfg.id + ": refused by " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
          if (st.current == phase::awaiting && msg->sender().rfind("coord/", 0) == 0) {
            // Our contribution did not count: fetch the committed state and go on from it.
            const auto f = fragment_of(msg->sender());
            if (f < st.theta_global.size()) {
              st.current = phase::syncing;
              request_state(self, f);
            }
          }
        } else if (env.isShutdown()) {
          self->quit();
        }
      },
      [=](step_atom) { on_step(self); },
      [=](stop_atom) { self->quit(); },
  };
}

}  // namespace atl
