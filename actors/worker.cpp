#include "actors/worker.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/pseudo_gradient.hpp"
#include "runtime/digest.hpp"
#include "runtime/fault_point.hpp"
#include "runtime/log.hpp"

namespace atl {
namespace {

using self_ptr = caf::stateful_actor<worker_state>*;
using phase = worker_state::phase;

// How long a worker waits for a FragmentState before asking again (idempotent).
constexpr auto state_retry = std::chrono::seconds(2);

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

bool ddp(const worker_state& st) { return st.cfg.run.mode == "ddp"; }

bool any_awaiting_state(const worker_state& st) {
  for (const auto& f : st.fragments)
    if (f.awaiting_state) return true;
  return false;
}

void request_state(self_ptr self, std::size_t f) {
  auto& st = self->state;
  wire::outgoing out;
  out.envelope.initStateRequest().setFragment(static_cast<std::uint32_t>(f));
  // Rank 0's parameters travel along: a fresh run is seeded from them (every worker
  // starts from the same seed anyway; the others need not pay the bytes).
  if (st.cfg.spec.rank == 0) {
    std::vector<float> local(st.model->fragment_size(f));
    st.model->read_fragment(f, local.data());
    out.tensors.push_back(wire::tensor::from_floats(local.data(), local.size()));
  }
  st.fragments[f].awaiting_state = true;
  st.mail->send(coordinator_of(f), st.fragments[f].epoch, out);
}

// Held-out loss of theta_global (replicas are identical in ddp).
float evaluate_global(worker_state& st) { return ddp(st) ? st.model->evaluate() : st.model->evaluate_global(); }

void report_progress(self_ptr self) {
  auto& st = self->state;
  const double dt = std::chrono::duration<double>(st.now() - st.report_time).count();
  wire::outgoing out;
  auto p = out.envelope.initProgress();
  p.setStep(static_cast<std::uint64_t>(st.step));
  p.setLoss(st.last_loss);
  p.setTokensPerSec(dt > 0 ? static_cast<float>(st.tokens_since_report / dt) : 0.0f);
  p.setBytesSent(st.mail->bytes_sent());
  p.setBytesReceived(st.bytes_received);
  p.setWaitSeconds(static_cast<float>(st.wait_seconds));
  st.mail->send(st.cfg.registry, st.epoch, out);
  st.tokens_since_report = 0;
  st.report_time = st.now();
}

void maybe_evaluate(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.spec.rank != 0 || st.step == 0 || st.step % st.cfg.run.eval_every != 0 || st.step == st.last_eval_step ||
      st.step >= st.cfg.run.steps)
    return;
  st.last_eval_step = st.step;
  wire::outgoing out;
  auto e = out.envelope.initEvalReport();
  e.setStep(static_cast<std::uint64_t>(st.step));
  e.setValLoss(evaluate_global(st));
  st.mail->send(st.cfg.registry, st.epoch, out);
}

void finish(self_ptr self) {
  auto& st = self->state;
  st.current = phase::finished;
  const float val = st.cfg.spec.rank == 0 ? evaluate_global(st) : -1.0f;
  const double wall = std::chrono::duration<double>(st.now() - st.started).count();
  wire::outgoing out;
  auto d = out.envelope.initWorkerDone();
  d.setSteps(static_cast<std::uint64_t>(st.step));
  d.setFinalLoss(st.last_loss);
  d.setValLoss(val);
  d.setTokensPerSec(wall > 0 ? static_cast<float>(st.tokens_total / wall) : 0.0f);
  d.setWallSeconds(static_cast<float>(wall));
  d.setWaitSeconds(static_cast<float>(st.wait_seconds));
  d.setBytesReceived(st.bytes_received);
  d.setBytesSent(st.mail->bytes_sent());
  st.mail->send(st.cfg.registry, st.epoch, out);
  log_info(st.cfg.id + ": finished " + std::to_string(st.step) + " steps");
  self->quit();
}

void block(worker_state& st) {
  st.current = phase::blocked;
  st.blocked_since = st.now();
}

void unblock_accounting(worker_state& st) {
  st.wait_seconds += std::chrono::duration<double>(st.now() - st.blocked_since).count();
}

void unblock(self_ptr self) {
  auto& st = self->state;
  if (st.current != phase::blocked) return;
  unblock_accounting(st);
  st.current = phase::training;
  self->send(self, step_atom::value);
}

void ask_state_after_refusal(self_ptr self, std::size_t f);

// (Re)sends the pending contribution of fragment f for round frag.pending_round, stamped with
// the fragment's epoch. Its bytes never change: the error-feedback residual was taken once.
void send_pending(self_ptr self, std::size_t f) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  wire::outgoing out;
  auto c = out.envelope.initContribution();
  c.setFragment(static_cast<std::uint32_t>(f));
  c.setRound(frag.pending_round);
  c.setWeight(1.0f);
  c.setStep(static_cast<std::uint64_t>(frag.merge_at - st.cfg.run.overlap));
  encoded_values copy = frag.pending;
  put_contribution(c, std::move(copy), out);
  st.mail->send(coordinator_of(f), frag.epoch, out);
  frag.pending_seq = st.mail->last_seq();
  frag.sent_at = st.now();  // a reopened round gets the whole result timeout
}

// Sends the encoded pseudo-gradient (or gradient) of fragment f for `round`, and keeps it
// until its result arrives.
void send_contribution(self_ptr self, std::size_t f, std::uint64_t round, encoded_values enc) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  frag.pending = std::move(enc);
  frag.pending_round = round;
  frag.awaiting_result = true;
  frag.result_ready = false;
  frag.merge_at = st.step + st.cfg.run.overlap;
  send_pending(self, f);
  ATL_FAULT_POINT("worker.contributed");
}

// NaN or infinity in what a worker would send: the replica diverged; the supervisor
// restarts it.
void quit_on_encode_error(self_ptr self, std::size_t f, const status& err) {
  log_error(self->state.cfg.id + ": cannot encode fragment " + std::to_string(f) + ": " + err.describe());
  self->quit(caf::make_error(caf::sec::runtime_error));
}

// A refusal of fragment f's pending contribution. stale_epoch: the round opened in a newer
// epoch than we knew (a membership change, a re-placed coordinator); the refusal carries
// it, so the same contribution goes again. Anything else: it will not count.
void on_contribution_refused(self_ptr self, std::size_t f, const wire::message& refusal) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  const auto r = refusal.envelope().getRefusal();
  if (!frag.awaiting_result || frag.result_ready || r.getRefusedSeq() != frag.pending_seq) return;  // an old one
  if (static_cast<errc>(r.getCode()) == errc::duplicate) return;  // a resend it already has: keep waiting
  if (static_cast<errc>(r.getCode()) == errc::stale_epoch && refusal.epoch() > frag.epoch) {
    frag.epoch = refusal.epoch();
    send_pending(self, f);
    return;
  }
  ask_state_after_refusal(self, f);
}

// The round's result has not come within diloco.result_timeout_ms: the contribution or the
// result may have been lost, or the round waits on a slow peer. The contribution goes
// again: duplicate (it counted: keep waiting), accepted (it was lost), wrong_round (the
// result was lost: resync). Giving up on a round that counts us would stall it.
bool result_overdue(const worker_state& st, std::size_t f) {
  const auto& frag = st.fragments[f];
  if (!frag.awaiting_result || frag.result_ready || ddp(st)) return false;
  const auto limit = std::chrono::milliseconds(st.cfg.run.result_timeout_ms > 0 ? st.cfg.run.result_timeout_ms
                                                                                : 2 * st.cfg.run.lease_ms);
  return st.now() - frag.sent_at > limit;
}

// The coordinator refused our contribution: ask for the committed state of f. If it is
// still the contribution's base (the round is open), the same contribution goes again when
// it comes; if it is newer, it is adopted. Training goes on until f's next sync point.
void ask_state_after_refusal(self_ptr self, std::size_t f) {
  auto& st = self->state;
  log_warn(st.cfg.id + ": round " + std::to_string(st.fragments[f].pending_round) + " of fragment " +
           std::to_string(f) + " refused our contribution; asking for its committed state");
  st.fragments[f].awaiting_result = false;
  request_state(self, f);
  unblock(self);
}

// At a sync step of fragment f: its round is the schedule's for this step. A worker whose
// state is already that new (a joiner) has nothing to add to it.
void contribute(self_ptr self, std::size_t f) {
  auto& st = self->state;
  const auto round = st.schedule->round_at(static_cast<std::int64_t>(f), st.step);
  if (st.fragments[f].round >= round) return;
  const replica::encoding how{st.codec, static_cast<std::size_t>(st.cfg.run.codec_chunk), st.cfg.run.error_feedback};
  encoded_values enc;
  if (auto err = st.model->encode_pseudo_gradient(f, how, enc)) return quit_on_encode_error(self, f, err);
  send_contribution(self, f, round, std::move(enc));
}

void merge(worker_state& st, std::size_t f) {
  auto& frag = st.fragments[f];
  st.model->merge_global(f, frag.result.data(), static_cast<float>(st.cfg.run.alpha));
  frag.result = {};
  frag.round = frag.result_round;
  frag.awaiting_result = frag.result_ready = false;
  frag.pending = {};
}

// Merges every result due before `step` trains; false if one has not arrived (blocked).
bool merge_due_results(self_ptr self, bool all) {
  auto& st = self->state;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& frag = st.fragments[f];
    if (!frag.awaiting_result || (!all && frag.merge_at > st.step)) continue;
    if (!frag.result_ready) {
      block(st);
      return false;
    }
    merge(st, f);
  }
  return true;
}

void on_step_diloco(self_ptr self) {
  auto& st = self->state;
  const bool last = st.step >= st.cfg.run.steps;
  if (!merge_due_results(self, last)) return;
  maybe_evaluate(self);
  if (last) {
    finish(self);
    return;
  }
  // Never past a sync point of a fragment whose state is on its way: contributing later
  // would put this worker a round out of step with the others, and rounds of different
  // fragments could then wait on each other.
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    if (st.fragments[f].awaiting_state && st.schedule->syncs_at(static_cast<std::int64_t>(f), st.step + 1)) {
      block(st);
      return;
    }
  }
  const auto result = st.model->train_step(st.step);
  st.step++;
  st.last_loss = result.loss;
  st.tokens_since_report += result.tokens;
  st.tokens_total += result.tokens;
  if (st.step % st.cfg.run.log_every == 0) report_progress(self);
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (st.schedule->syncs_at(static_cast<std::int64_t>(f), st.step)) contribute(self, f);
  if (st.current == phase::training) self->send(self, step_atom::value);
}

// ddp: gradients out, averaged gradients in, then the optimizer step.
void on_step_ddp(self_ptr self) {
  auto& st = self->state;
  maybe_evaluate(self);
  if (st.step >= st.cfg.run.steps) {
    finish(self);
    return;
  }
  const auto result = st.model->compute_gradients(st.step);
  st.last_loss = result.loss;
  st.tokens_since_report += result.tokens;
  st.tokens_total += result.tokens;
  for (std::size_t f = 0; f < st.fragments.size() && st.current == phase::training; ++f) {
    std::vector<float> grads(st.model->fragment_size(f));
    st.model->read_gradients(f, grads.data());
    encoded_values enc;
    if (auto err = encode(codec_kind::fp32, grads.data(), grads.size(), 0, enc)) return quit_on_encode_error(self, f, err);
    send_contribution(self, f, st.fragments[f].round + 1, std::move(enc));  // one round a step
  }
  if (st.current == phase::training) block(st);
}

void finish_ddp_step(self_ptr self) {
  auto& st = self->state;
  for (auto& frag : st.fragments)
    if (!frag.result_ready) return;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& frag = st.fragments[f];
    st.model->write_gradients(f, frag.result.data());
    frag.round = frag.result_round;
    frag.awaiting_result = frag.result_ready = false;
    frag.pending = {};
  }
  st.model->apply_gradients(st.step);
  st.step++;
  if (st.step % st.cfg.run.log_every == 0) report_progress(self);
  unblock(self);
}

// Every fragment has its state: a joiner starts, a worker held at a sync point goes on.
// A worker joining a run in progress starts at the step of the newest round it received:
// past every round it has, and before the sync point of every round it takes part in.
void resume_if_synced(self_ptr self) {
  auto& st = self->state;
  if (any_awaiting_state(st) || (st.current != phase::syncing && st.current != phase::blocked)) return;
  if (st.step == 0 && !ddp(st)) {
    for (std::size_t f = 0; f < st.fragments.size(); ++f)
      st.step = std::max(st.step, st.schedule->step_of(static_cast<std::int64_t>(f), st.fragments[f].round));
  }
  if (st.current == phase::blocked) unblock_accounting(st);
  st.current = phase::training;
  self->send(self, step_atom::value);
}

// fragment f's committed state at `round` is here: it replaces the local fragment.
void apply_state(self_ptr self, std::size_t f, std::uint64_t round, std::uint64_t epoch, std::vector<float> theta) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  frag.fetch.cancel();  // a transfer of an older round, if any, is moot
  st.model->adopt_global(f, theta.data());
  frag.round = round;
  frag.awaiting_state = false;
  frag.awaiting_result = frag.result_ready = false;
  frag.pending = {};
  frag.epoch = epoch;
  st.epoch = std::max(st.epoch, frag.epoch);
  resume_if_synced(self);
}

// Asks the fetch's current keeper for the next chunk of fragment f's state.
void request_chunk(self_ptr self, std::size_t f) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  const auto req = frag.fetch.next_request();
  wire::outgoing out;
  auto c = out.envelope.initChunkRequest();
  c.setFragment(static_cast<std::uint32_t>(f));
  c.setRound(frag.fetch.round());
  c.setOffset(req.offset);
  c.setCount(req.count);
  st.mail->send(req.keeper, frag.epoch, out);
  frag.chunk_asked_at = st.now();
}

// The keeper asked cannot serve: the next one resumes the transfer; once every keeper has
// failed a few times, the coordinator is asked for the state again.
void fetch_elsewhere(self_ptr self, std::size_t f, const std::string& why) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  const std::string from = frag.fetch.source();
  if (!frag.fetch.next_source()) {
    log_warn(st.cfg.id + ": no keeper could serve fragment " + std::to_string(f) + "; asking its coordinator again");
    request_state(self, f);
    return;
  }
  log_warn(st.cfg.id + ": " + from + " " + why + "; fetching fragment " + std::to_string(f) + " from " +
           frag.fetch.source() + " at value " + std::to_string(frag.fetch.received()));
  request_chunk(self, f);
}

// Adopts the state a FragmentState carries, or starts fetching it in chunks.
void adopt_state(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  if (msg->tensors().size() == 1) {
    apply_state(self, f, round, msg->epoch(), msg->tensors()[0].to_floats());
    return;
  }
  const auto header = msg->envelope().getFragmentState();
  std::vector<std::string> keepers;
  for (const auto k : header.getKeepers()) keepers.push_back(k);
  frag.awaiting_state = true;  // until the last chunk: no contribution, no training past a sync point
  frag.awaiting_result = frag.result_ready = false;
  frag.pending = {};
  frag.fetch = state_fetch(round, header.getCount(), header.getDigest(), std::move(keepers),
                           static_cast<std::uint64_t>(st.cfg.run.state_chunk_values));
  frag.fetch_epoch = msg->epoch();
  request_chunk(self, f);
}

void on_chunk(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto reply = msg->envelope().getChunkReply();
  const std::size_t f = reply.getFragment();
  if (f >= st.fragments.size()) return;
  auto& frag = st.fragments[f];
  std::vector<float> values;
  if (reply.getFound() && msg->tensors().size() == 1 && msg->tensors()[0].dtype == schema::DType::FLOAT32)
    values = msg->tensors()[0].to_floats();
  switch (frag.fetch.on_reply(msg->sender(), reply.getRound(), reply.getOffset(), reply.getFound(), values)) {
    case state_fetch::outcome::ignored: return;
    case state_fetch::outcome::more: request_chunk(self, f); return;
    case state_fetch::outcome::failed:
      fetch_elsewhere(self, f, "cannot serve round " + std::to_string(reply.getRound()));
      return;
    case state_fetch::outcome::done:
      log_info(st.cfg.id + ": fetched fragment " + std::to_string(f) + " round " + std::to_string(frag.fetch.round()) +
               " (" + std::to_string(frag.fetch.received()) + " values) in chunks, last from " + frag.fetch.source());
      apply_state(self, f, frag.fetch.round(), frag.fetch_epoch, frag.fetch.take_values());
      return;
  }
}

void on_state(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  if (!frag.awaiting_state) {
    // Unasked: a re-placed coordinator announces the committed state as it opens its
    // first round, in a new epoch.
    const bool waiting = frag.awaiting_result && !frag.result_ready;
    if (waiting && round + 1 == frag.pending_round) {
      // The round we contributed to is open again: the same contribution goes to it.
      frag.epoch = std::max(frag.epoch, msg->epoch());
      log_warn(st.cfg.id + ": fragment " + std::to_string(f) + " has a new coordinator; contributing to round " +
               std::to_string(frag.pending_round) + " again");
      send_pending(self, f);
      return;
    }
    if (!(waiting && round >= frag.pending_round)) {  // a duplicate, or nothing to recover
      if (round == frag.round) frag.epoch = std::max(frag.epoch, msg->epoch());
      return;
    }
    // It committed our round before it died, without releasing it: adopt its state.
    log_warn(st.cfg.id + ": fragment " + std::to_string(f) + " has a new coordinator at round " +
             std::to_string(round) + "; resyncing");
  } else if (frag.fetch.active() && round == frag.fetch.round()) {
    return;  // the answer to a repeated request: that round is already on its way
  } else if (frag.pending.count > 0 && round + 1 == frag.pending_round) {
    // Asked after a refusal, and our contribution's round is the open one: the same
    // contribution goes to it (in its epoch).
    frag.awaiting_state = false;
    frag.epoch = msg->epoch();
    frag.awaiting_result = true;
    send_pending(self, f);
    resume_if_synced(self);
    return;
  }
  adopt_state(self, msg, f, round);
}

void on_result(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  if (!frag.awaiting_result || frag.result_ready || round != frag.pending_round) return;  // duplicate or stale
  frag.result = msg->tensors()[0].to_floats();
  frag.result_round = round;
  frag.result_ready = true;
  frag.epoch = msg->epoch();
  st.epoch = std::max(st.epoch, frag.epoch);
  if (ddp(st)) {
    finish_ddp_step(self);
    return;
  }
  wire::outgoing out;
  auto ack = out.envelope.initRoundAck();
  ack.setFragment(static_cast<std::uint32_t>(f));
  ack.setRound(round);
  ack.setDigest(digest64(frag.result.data(), frag.result.size() * sizeof(float)));
  st.mail->send(st.cfg.registry, st.epoch, out);
  unblock(self);  // on_step merges it when it is due
}

void on_global(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto env = msg->envelope();
  const bool is_state = env.isFragmentState();
  const std::size_t f = is_state ? env.getFragmentState().getFragment() : env.getRoundResult().getFragment();
  const std::uint64_t round = is_state ? env.getFragmentState().getRound() : env.getRoundResult().getRound();
  // One tensor of the fragment's size, or (a chunked state) none and the right count.
  const bool inline_ok = f < st.fragments.size() && msg->tensors().size() == 1 &&
                         msg->tensors()[0].data.size() == st.model->fragment_size(f) * sizeof(float);
  const bool header_ok = is_state && f < st.fragments.size() && msg->tensors().empty() &&
                         env.getFragmentState().getCount() == st.model->fragment_size(f);
  if (!inline_ok && !header_ok) {
    st.mail->refuse(*msg, make_error(errc::tensor_mismatch, "fragment " + std::to_string(f)), st.epoch);
    return;
  }
  if (is_state) on_state(self, msg, f, round);
  else on_result(self, msg, f, round);
}

}  // namespace

const char* to_string(worker_state::phase p) {
  switch (p) {
    case phase::syncing: return "syncing";
    case phase::training: return "training";
    case phase::blocked: return "blocked";
    case phase::finished: return "finished";
  }
  return "unknown";
}

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory) {
  auto& st = self->state;
  st.cfg = cfg;
  st.clock = &self->clock();
  auto codec = parse_codec(cfg.run.codec);
  st.codec = codec ? *codec : codec_kind::fp32;  // the config was validated at the head
  st.mail = std::make_unique<mailer>(*net, cfg.id, cfg.cluster_id);
  st.model = factory(cfg.run, cfg.spec);  // may throw: the node agent sees the failure and restarts
  st.schedule = std::make_unique<fragment_schedule>(cfg.run.sync_every, cfg.run.fragments);
  st.fragments.resize(st.model->fragment_count());
  st.started = st.report_time = st.now();
  for (std::size_t f = 0; f < st.fragments.size(); ++f) request_state(self, f);
  self->delayed_send(self, state_retry, tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        st.bytes_received += msg->wire_bytes();
        const auto env = msg->envelope();
        if (env.isFragmentState() || env.isRoundResult()) {
          on_global(self, msg);
        } else if (env.isChunkReply()) {
          on_chunk(self, msg);
        } else if (env.isRefusal()) {
          log_warn(st.cfg.id + ": refused by " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
          const auto f = fragment_of(msg->sender());
          if (f < st.fragments.size() && !ddp(st)) on_contribution_refused(self, f, *msg);
        } else if (env.isShutdown()) {
          self->quit();
        }
      },
      [=](step_atom) {
        if (self->state.current != phase::training) return;
        if (ddp(self->state)) on_step_ddp(self);
        else on_step_diloco(self);
      },
      [=](tick_atom) {
        auto& st = self->state;
        if (st.current == phase::finished) return;
        for (std::size_t f = 0; f < st.fragments.size(); ++f) {
          auto& frag = st.fragments[f];
          // A keeper silent for a whole tick: the next one resumes the transfer.
          if (frag.fetch.active()) {
            if (st.now() - frag.chunk_asked_at >= state_retry) fetch_elsewhere(self, f, "did not answer");
          }
          // A coordinator may not be placed yet when we first ask.
          else if (frag.awaiting_state) request_state(self, f);
          else if (result_overdue(st, f)) send_pending(self, f);
        }
        self->delayed_send(self, state_retry, tick_atom::value);
      },
      [=](resend_atom) {  // the node's link to the head dropped: what we sent may be lost
        auto& st = self->state;
        if (st.current == phase::finished || ddp(st)) return;
        for (std::size_t f = 0; f < st.fragments.size(); ++f) {
          if (st.fragments[f].fetch.active()) request_chunk(self, f);
          else if (st.fragments[f].awaiting_state) request_state(self, f);
          else if (st.fragments[f].awaiting_result && !st.fragments[f].result_ready) send_pending(self, f);
        }
      },
      [=](stop_atom) { self->quit(); },
  };
}

}  // namespace atl
