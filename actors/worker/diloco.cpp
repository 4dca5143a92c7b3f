// DiLoCo / Streaming DiLoCo steps (actors/worker/worker.hpp): train, contribute each fragment at
// its sync step, merge each result before its step trains.
#include "actors/shared/messages.hpp"
#include "actors/worker/data.hpp"
#include "actors/worker/steps.hpp"
#include "actors/worker/strategy.hpp"
#include "runtime/algorithm/overlap_merge.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace {

// At a sync step of fragment f: its round is the schedule's for this step. A worker whose
// state is already that new (a joiner) has nothing to add to it.
void contribute(worker_self self, std::size_t f) {
  auto& st = self->state;
  const auto round = st.schedule->round_at(static_cast<std::int64_t>(f), st.step);
  if (st.fragments[f].round() >= round) return;
  const replica::encoding how{st.codec, static_cast<std::size_t>(st.cfg.run.codec_chunk), error_feedback_of(st.cfg.run),
                              static_cast<float>(feedback_decay_of(st.cfg.run))};
  encoded_values enc;
  if (auto err = st.model->encode_pseudo_gradient(f, how, enc)) return quit_on_encode_error(self, f, err);
  if (st.cfg.run.carry_overlap && st.cfg.run.overlap > 0) {
    st.at_contribution[f].resize(st.model->fragment_size(f));
    st.model->read_fragment(f, st.at_contribution[f].data());
  }
  const auto weight = contribution_weight(st.cfg.run.weighting == "samples", st.trained[f]);
  st.trained[f] = {};
  send_contribution(self, f, round, std::move(enc), weight, contribution_pieces(self, f, round));
}

// Merges a round's theta_global into fragment f; with diloco.carry_overlap, keeping the
// steps trained since the contribution (runtime/algorithm/overlap_merge.hpp).
void merge_result(worker_state& st, std::size_t f, const float* theta_global) {
  const auto alpha = static_cast<float>(st.cfg.run.alpha);
  auto& at = st.at_contribution[f];
  if (at.empty()) return st.model->merge_global(f, theta_global, alpha);
  std::vector<float> local(at.size()), merged(at.size());
  st.model->read_fragment(f, local.data());
  st.model->merge_global(f, theta_global, alpha);
  st.model->read_fragment(f, merged.data());
  carry_since_contribution(merged.data(), local.data(), at.data(), alpha, at.size());
  st.model->write_fragment(f, merged.data());
  at.clear();
}

// Merges every result due before `step` trains (every one at the end); false if one has
// not arrived (blocked).
bool merge_due_results(worker_self self, bool all) {
  auto& st = self->state;
  for (std::size_t f = 0; f < st.fragments.size(); ++f) {
    auto& frag = st.fragments[f];
    if (!(frag.waiting_for_result() || frag.has_result()) || (!all && frag.merge_at() > st.step)) continue;
    if (!frag.has_result()) {
      block(st);
      return false;
    }
    auto result = frag.take_result();
    merge_result(st, f, (*result)->data());
  }
  return true;
}

// The schedule's step moves on by one: progress reports and the sync points it reaches.
void advance(worker_self self) {
  auto& st = self->state;
  st.step++;
  if (st.step % st.cfg.run.log_every == 0) report_progress(self);
  for (std::size_t f = 0; f < st.fragments.size(); ++f)
    if (st.schedule->syncs_at(static_cast<std::int64_t>(f), st.step)) contribute(self, f);
}

// Time-boxed phases (diloco.sync_every_s): the training clock is past the schedule's step.
bool clock_ahead(worker_state& st) {
  if (!st.pacer) return false;
  if (!st.pacer->started()) st.pacer->start(st.now(), st.step, st.wait_seconds);
  return st.pacer->ticks_at(st.now(), st.wait_seconds) > st.step;
}

class diloco_steps final : public step_strategy {
 public:
  // Each step message trains one inner step and moves the schedule on by one; in time mode
  // it either trains (the clock has not reached the next tick) or moves the schedule on
  // without training (it has: a slow worker crossing several ticks in one inner step).
  void step(worker_self self) override {
    auto& st = self->state;
    const bool last = st.step >= st.cfg.run.steps || data_exhausted(st);
    if (!merge_due_results(self, last)) return;
    maybe_evaluate(self);
    if (last) return finish(self);
    // Never past a sync point of a fragment whose state is on its way: contributing later
    // would put this worker a round out of step with the others, and rounds of different
    // fragments could then wait on each other.
    for (std::size_t f = 0; f < st.fragments.size(); ++f) {
      if (st.fragments[f].state_on_its_way() && st.schedule->syncs_at(static_cast<std::int64_t>(f), st.step + 1)) {
        block(st);
        return;
      }
    }
    if (clock_ahead(st)) {
      advance(self);
    } else {
      if (!feed_next_step(self)) {  // its units are on their way
        block(st);
        return;
      }
      train(self);
      if (!st.pacer) advance(self);
    }
    if (st.current == worker_state::phase::training) self->send(self, step_atom::value);
  }

  void train(worker_self self) {
    auto& st = self->state;
    begin_inner_step(st);
    const auto result = st.model->train_step(st.step);
    end_inner_step(st);
    if (result.held_out) report_held_out(self, *result.held_out);  // measured before this step's update
    st.inner_steps++;
    st.last_loss = result.loss;
    st.tokens_since_report += result.tokens;
    st.tokens_total += result.tokens;
    for (auto& trained : st.trained) trained.step(result.tokens);
  }

  // The digest of what we merge goes to the registry; on_step merges it when it is due.
  void result_arrived(worker_self self, std::size_t f) override {
    const auto& frag = self->state.fragments[f];
    const auto& theta = frag.result();
    const auto digest =
        frag.result_digest() ? *frag.result_digest() : digest64(theta.data(), theta.size() * sizeof(float));
    acknowledge_round(self, f, frag.pending_round(), digest, false);
    unblock(self);
  }

  float evaluate_global(worker_state& st) override { return st.model->evaluate_global(); }
  bool recovers_rounds() const override { return true; }
};

}  // namespace

std::unique_ptr<step_strategy> make_diloco_steps() { return std::make_unique<diloco_steps>(); }

}  // namespace atl
