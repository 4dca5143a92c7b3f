// What both step strategies of a worker use: reports to the registry, blocking on results,
// and sending a contribution.
#include "actors/worker/steps.hpp"

#include <caf/all.hpp>

#include "actors/shared/data_pieces.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "actors/worker/done.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl {

void begin_inner_step(worker_state& st) {
  if (!st.threads) return;
  if (const auto next = st.threads->before_step()) st.cfg.apply_threads(*next);
  if (!st.threads->settled()) st.step_started = st.now();  // timed only during the trial
}

void end_inner_step(worker_state& st) {
  if (!st.threads || st.threads->settled()) return;
  st.threads->after_step(std::chrono::duration<double>(st.now() - st.step_started).count());
  if (!st.threads->settled()) return;
  log_info(st.cfg.id + ": threads (LibTorch x BLAS) " + describe(*st.threads));
  if (st.cfg.keep_threads) st.cfg.keep_threads(st.threads->chosen());
}

std::string thread_layout_report(const worker_state& st) {
  if (!st.threads) return "";
  if (st.threads->settled()) return to_string(st.threads->chosen());
  const auto current = st.threads->current();
  return current ? "trying " + to_string(*current) : "trying";
}

void report_progress(worker_self self) {
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
  p.setThreadLayout(thread_layout_report(st));
  st.mail->send(st.cfg.registry, st.epoch, out);
  st.tokens_since_report = 0;
  st.report_time = st.now();
}

void maybe_evaluate(worker_self self) {
  auto& st = self->state;
  if (st.cfg.spec.rank != 0 || st.step == 0 || st.step % st.cfg.run.eval_every != 0 || st.step == st.last_eval_step ||
      st.step >= st.cfg.run.steps || !st.model->evaluates())
    return;
  st.last_eval_step = st.step;
  report_held_out(self, st.steps->evaluate_global(st));
}

void report_held_out(worker_self self, float loss) {
  auto& st = self->state;
  wire::outgoing out;
  auto e = out.envelope.initEvalReport();
  e.setStep(static_cast<std::uint64_t>(st.step));
  e.setValLoss(loss);
  st.mail->send(st.cfg.registry, st.epoch, out);
}

void finish(worker_self self) {
  auto& st = self->state;
  st.current = worker_state::phase::finished;
  if (const auto loss = st.model->finish_queued_step()) st.last_loss = *loss;
  const float val = st.cfg.spec.rank == 0 && st.model->evaluates() ? st.steps->evaluate_global(st) : -1.0f;
  const double wall = std::chrono::duration<double>(st.now() - st.started).count();
  worker_done_report report;
  report.steps = static_cast<std::uint64_t>(st.step);
  report.final_loss = st.last_loss;
  report.val_loss = val;
  report.tokens_per_sec = wall > 0 ? static_cast<float>(st.tokens_total / wall) : 0.0f;
  report.wall_seconds = static_cast<float>(wall);
  report.wait_seconds = static_cast<float>(st.wait_seconds);
  report.bytes_received = st.bytes_received;
  report.bytes_sent = st.mail->bytes_sent();
  for (const auto& ack : st.last_acks)
    if (ack) report.last_acks.push_back(*ack);
  send_worker_done(*st.mail, st.cfg.registry, st.epoch, report);
  if (st.cfg.keep_done) st.cfg.keep_done(report);
  log_info(st.cfg.id + ": finished " + std::to_string(st.step) + " steps" +
           (st.pacer ? " (" + std::to_string(st.inner_steps) + " inner steps in time-boxed phases)" : ""));
  self->quit();
}

void block(worker_state& st) {
  st.current = worker_state::phase::blocked;
  st.blocked_since = st.now();
}

void unblock(worker_self self) {
  auto& st = self->state;
  if (st.current != worker_state::phase::blocked) return;
  st.wait_seconds += std::chrono::duration<double>(st.now() - st.blocked_since).count();
  st.current = worker_state::phase::training;
  self->send(self, step_atom::value);
}

void send_pending(worker_self self, std::size_t f) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  wire::outgoing out;
  auto c = out.envelope.initContribution();
  c.setFragment(static_cast<std::uint32_t>(f));
  c.setRound(frag.pending_round());
  c.setWeight(st.contributed[f].weight);
  c.setStep(static_cast<std::uint64_t>(frag.merge_at() - st.cfg.run.overlap));
  const auto& pieces = st.contributed[f].pieces;
  if (!pieces.empty()) put_data_pieces(c.initData(static_cast<unsigned>(pieces.size())), pieces);
  encoded_values copy = frag.pending();
  put_contribution(c, std::move(copy), out);
  st.mail->send(coordinator_id(static_cast<std::uint32_t>(f)), frag.epoch(), out);
  frag.sent(st.mail->last_seq(), st.now());
}

void acknowledge_round(worker_self self, std::size_t f, std::uint64_t round, std::uint64_t digest, bool adopted) {
  auto& st = self->state;
  wire::outgoing out;
  auto ack = out.envelope.initRoundAck();
  ack.setFragment(static_cast<std::uint32_t>(f));
  ack.setRound(round);
  ack.setDigest(digest);
  ack.setAdopted(adopted);
  if (!adopted && st.contributed[f].round == round)
    ack.setSinceContributed(std::chrono::duration<double>(st.now() - st.contributed[f].at).count());
  st.mail->send(st.cfg.registry, st.epoch, out);
  if (st.last_acks.size() <= f) st.last_acks.resize(f + 1);
  st.last_acks[f] = worker_done_report::fragment_ack{static_cast<std::uint32_t>(f), round, digest, adopted};
}

void send_contribution(worker_self self, std::size_t f, std::uint64_t round, encoded_values enc, float weight,
                       std::vector<data::piece> pieces) {
  auto& st = self->state;
  if (auto err = st.fragments[f].contribute(round, st.step + st.cfg.run.overlap, std::move(enc))) {
    log_error(st.cfg.id + ": fragment " + std::to_string(f) + ": " + err.describe());
    return;
  }
  st.contributed[f] = {round, st.now(), weight, std::move(pieces)};
  send_pending(self, f);
  ATL_FAULT_POINT("worker.contributed");
}

void quit_on_encode_error(worker_self self, std::size_t f, const status& err) {
  log_error(self->state.cfg.id + ": cannot encode fragment " + std::to_string(f) + ": " + err.describe());
  self->quit(caf::make_error(caf::sec::runtime_error));
}

}  // namespace atl
