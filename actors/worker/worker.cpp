#include "actors/worker/worker.hpp"

#include <algorithm>
#include <stdexcept>

#include <caf/all.hpp>

#include "actors/shared/guarded_handler.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "actors/worker/data.hpp"
#include "actors/worker/sliced_replica.hpp"
#include "actors/worker/state_intake.hpp"
#include "actors/worker/strategy.hpp"
#include "actors/worker/warm.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl {

worker_state::worker_state() = default;
worker_state::~worker_state() = default;

namespace {

using self_ptr = worker_self;
using phase = worker_state::phase;
using retry = fragment_sync::retry;

std::string coordinator_of(std::size_t fragment) { return coordinator_id(static_cast<std::uint32_t>(fragment)); }

// A DiLoCo worker joining a run in progress starts at the step of the newest round it
// received: past every round it has, and before the sync point of every round it takes
// part in (a unit whose next round it starts past says it skips it: skip_rounds_started_past).
// It first takes a live peer's inner-optimizer state, if it can (inner.warm_start).
void resume_if_synced(self_ptr self) {
  auto& st = self->state;
  for (const auto& frag : st.fragments)
    if (frag.state_on_its_way()) return;
  if (st.current != phase::syncing && st.current != phase::blocked) return;
  if (st.step == 0 && st.steps->recovers_rounds()) {
    for (std::size_t f = 0; f < st.fragments.size(); ++f)
      st.step = std::max(st.step, st.schedule->step_of(static_cast<std::int64_t>(f), st.fragments[f].round()));
    bool asked = false;
    for (std::size_t f = 0; f < st.fragments.size(); ++f) asked = skip_rounds_started_past(self, f) || asked;
    if (asked) return;  // resumed when those states come
  }
  if (st.warm) return;  // its inner-optimizer state is on its way
  if (st.current == phase::syncing && st.step > 0 && !st.warm_tried && start_warm(self)) return;
  if (st.current == phase::blocked) unblock(self);
  else {
    st.current = phase::training;
    self->send(self, step_atom::value);
  }
}

void on_state(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  const auto& frag = st.fragments[f];
  const auto prefix = st.cfg.id + ": fragment " + std::to_string(f) + " has a new coordinator";
  switch (st.fragments[f].state_arrived(round, msg->epoch())) {
    case fragment_sync::on_state::ignore: return;
    case fragment_sync::on_state::send_again:
      log_warn(prefix + "; contributing to round " + std::to_string(frag.pending_round()) + " again");
      return send_pending(self, f);
    case fragment_sync::on_state::send_again_and_resume: send_pending(self, f); return resume_if_synced(self);
    case fragment_sync::on_state::resync:
      log_warn(prefix + " at round " + std::to_string(round) + "; resyncing");
      [[fallthrough]];
    case fragment_sync::on_state::adopt:
      if (adopt_state(self, msg, f, round)) resume_if_synced(self);
      return;
  }
}

// A refusal of fragment f's pending contribution that it will not count: ask for the
// committed state of f. If it is still the contribution's base (the round is open), the
// same contribution goes again when it comes; if it is newer, it is adopted. Training goes
// on until f's next sync point.
void on_refusal(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto r = msg->envelope().getRefusal();
  log_warn(st.cfg.id + ": refused by " + msg->sender() + ": " + r.getMessage().cStr());
  if (msg->sender() == registry_id())  // a lease: the data cursor's
    return data_refused(self, static_cast<errc>(r.getCode()), r.getMessage().cStr());
  const auto f = fragment_of_coordinator(msg->sender());
  if (!f || *f >= st.fragments.size() || !st.steps->recovers_rounds()) return;
  auto& frag = st.fragments[*f];
  switch (frag.refused(static_cast<errc>(r.getCode()), r.getRefusedSeq(), msg->epoch())) {
    case fragment_sync::on_refusal::ignore: return;
    case fragment_sync::on_refusal::send_again: return send_pending(self, *f);
    case fragment_sync::on_refusal::ask_state:
      log_warn(st.cfg.id + ": round " + std::to_string(frag.pending_round()) + " of fragment " + std::to_string(*f) +
               " refused our contribution; asking for its committed state");
      request_state(self, *f);
      return unblock(self);
  }
}

// A result that cannot be taken is refused; if it was the awaited round's (and `ask`), the
// committed state is asked for instead: it brings this worker to the round with the
// coordinator's bits.
void refuse_result(self_ptr self, const wire::message& msg, std::size_t f, std::uint64_t round, const error& err,
                   bool ask = true) {
  auto& st = self->state;
  log_warn(st.cfg.id + ": refused the result of fragment " + std::to_string(f) + " round " + std::to_string(round) +
           ": " + err.describe());
  st.mail->refuse(msg, err, st.epoch);
  auto& frag = st.fragments[f];
  if (!ask || !frag.waiting_for_result() || frag.pending_round() != round) return;
  request_state(self, f);
  unblock(self);  // as after a refusal: training goes on until f's next sync point
}

// A low-bit result: the round's change of theta_global (actors/decisions/round_tracker.hpp). One
// that cannot be applied here (malformed, non-finite, or not reaching the coordinator's
// digest) is refused, and the committed state is asked for instead: it brings this
// worker to the round with the coordinator's bits.
void on_update(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  if (f >= st.fragments.size()) {
    st.mail->refuse(*msg, make_error(errc::unknown_fragment, "fragment " + std::to_string(f)), st.epoch);
    return;
  }
  auto& frag = st.fragments[f];
  const auto result = msg->envelope().getRoundResult();
  auto& change = st.received_update;
  if (auto err = take_round_update(*msg, st.model->fragment_size(f), change))
    return refuse_result(self, *msg, f, round, err);
  if (result.getProvisional()) {
    // Held until its round is committed; one that cannot be applied is refused here, and
    // its confirmation then finds nothing held (the state is asked for then).
    auto held = frag.provisional_update_arrived(round, change, result.getDigest());
    if (!held) refuse_result(self, *msg, f, round, held.err(), /*ask=*/false);
    return;
  }
  auto taken = frag.update_arrived(round, msg->epoch(), change, result.getDigest());
  if (!taken) return refuse_result(self, *msg, f, round, taken.err());
  if (!*taken) return;  // duplicate or stale
  st.epoch = std::max(st.epoch, msg->epoch());
  st.steps->result_arrived(self, f);
}

// Early results: every keeper has the round whose result this worker holds; apply it.
void on_confirmation(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  if (f >= st.fragments.size() || !msg->tensors().empty()) {
    st.mail->refuse(*msg, make_error(errc::tensor_mismatch, "confirmation of fragment " + std::to_string(f)), st.epoch);
    return;
  }
  auto taken = st.fragments[f].confirmed(round, msg->epoch(), msg->envelope().getRoundResult().getDigest());
  if (!taken) return refuse_result(self, *msg, f, round, taken.err());
  if (!*taken) return;  // duplicate or stale
  st.epoch = std::max(st.epoch, msg->epoch());
  st.steps->result_arrived(self, f);
}

void on_global(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto env = msg->envelope();
  if (env.isRoundResult() && env.getRoundResult().getConfirms())
    return on_confirmation(self, msg, env.getRoundResult().getFragment(), env.getRoundResult().getRound());
  if (env.isRoundResult() && env.getRoundResult().getIsUpdate())
    return on_update(self, msg, env.getRoundResult().getFragment(), env.getRoundResult().getRound());
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
  if (is_state) return on_state(self, msg, f, round);
  auto values = st.fragments[f].recycled_buffer();
  msg->tensors()[0].copy_floats_to(values);
  if (env.getRoundResult().getProvisional()) {
    st.fragments[f].provisional_arrived(round, std::move(values), env.getRoundResult().getDigest());
    return;  // applied once its round is committed
  }
  if (!st.fragments[f].result_arrived(round, msg->epoch(), std::move(values))) return;  // duplicate or stale
  st.epoch = std::max(st.epoch, msg->epoch());
  st.steps->result_arrived(self, f);
}

void on_held(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  const auto held = msg.envelope().getStateHeld();
  const std::size_t f = held.getFragment();
  if (f >= st.fragments.size() || msg.sender() != coordinator_of(f)) return;
  const bool wanted_before = st.fragments[f].parameters_wanted();
  st.fragments[f].held(held.getSeedHeld());
  // The coordinator needs a seed and rank 0 has not sent it: send it now, not at the retry.
  if (st.cfg.spec.rank == 0 && !wanted_before && st.fragments[f].parameters_wanted()) request_state(self, f);
}

// What fragment f repeats: after a tick, or once the link to the head is back.
void repeat(self_ptr self, std::size_t f, retry what) {
  switch (what) {
    case retry::none: return;
    case retry::next_keeper: return fetch_elsewhere(self, f, "did not answer");
    case retry::next_chunk: return request_chunk(self, f);
    case retry::ask_state: return request_state(self, f);
    case retry::send_again:
      if (self->state.steps->recovers_rounds()) send_pending(self, f);
      return;
  }
}

// The round's result has not come within diloco.result_timeout_ms: the contribution or the
// result may have been lost, or the round waits on a slow peer. The contribution goes
// again: duplicate (it counted: keep waiting), accepted (it was lost), wrong_round (the
// result was lost: resync). Giving up on a round that counts us would stall it.
std::chrono::milliseconds result_timeout(const run_config& run) {
  return std::chrono::milliseconds(run.result_timeout_ms > 0 ? run.result_timeout_ms : 2 * run.lease_ms);
}

}  // namespace

caf::behavior worker_actor(caf::stateful_actor<worker_state>* self, transport* net, worker_config cfg,
                           replica_factory factory) {
  auto& st = self->state;
  st.cfg = cfg;
  st.clock = &self->clock();
  auto codec = parse_codec(cfg.run.codec);
  st.codec = codec ? *codec : codec_kind::fp32;  // the config was validated at the head
  st.mail = std::make_unique<mailer>(*net, cfg.id, cfg.cluster_id);
  if (ATL_FAIL_POINT("worker.replica")) throw std::runtime_error("fail point worker.replica: no replica");
  // May throw: the node agent sees the failure and restarts the worker.
  st.model = in_sync_units(factory(cfg.run, cfg.spec), cfg.run);
  st.steps = cfg.run.mode == "ddp" ? make_ddp_steps() : make_diloco_steps();
  st.schedule = std::make_unique<fragment_schedule>(cfg.run.sync_every, cfg.run.fragments, shards_of(cfg.run));
  if (cfg.run.sync_every_s > 0) st.pacer.emplace(cfg.run.sync_every_s / static_cast<double>(cfg.run.sync_every));
  st.fragments.resize(st.model->fragment_count());
  st.contributed.resize(st.model->fragment_count());
  st.trained.resize(st.model->fragment_count());
  st.at_contribution.resize(st.model->fragment_count());
  st.started = st.report_time = st.now();
  // The data-parallel baseline's step waits on the network: no trial, the process's threads.
  if (!cfg.thread_layouts.empty() && cfg.run.mode != "ddp") {
    st.threads.emplace(cfg.thread_layouts);
    std::string tried;
    for (const auto& l : cfg.thread_layouts) tried += (tried.empty() ? "" : ", ") + to_string(l);
    log_info(cfg.id + ": threads (LibTorch x BLAS): " +
             (st.threads->settled() ? describe(*st.threads)
                                    : "trying " + tried + " over the first " + std::to_string(st.threads->length()) +
                                          " steps, then keeping the fastest"));
  }
  start_data_feed(self);
  for (std::size_t f = 0; f < st.fragments.size(); ++f) request_state(self, f);
  self->delayed_send(self, state_retry, tick_atom::value);
  // A step that throws (its data file truncated mid-run, a LibTorch error) ends the worker
  // with the reason in the log, not only in the down message's "runtime_error"; the node
  // agent restarts it within its budget.
  self->set_exception_handler([id = cfg.id](caf::scheduled_actor*, std::exception_ptr& thrown) -> caf::error {
    try {
      std::rethrow_exception(thrown);
    } catch (const std::exception& e) {
      log_error(id + ": stopped: " + e.what());
    } catch (...) {
      log_error(id + ": stopped by an unknown exception");
    }
    return caf::make_error(caf::sec::runtime_error);
  });
  return {
      [=](const wire::message_ptr& msg) {
        guarded(*self->state.mail, *msg, self->state.epoch, "worker.handler", [&] {
          auto& st = self->state;
          st.bytes_received += msg->wire_bytes();
          const auto env = msg->envelope();
          if (env.isFragmentState() || env.isRoundResult()) on_global(self, msg);
          else if (env.isChunkReply()) {
            if (on_chunk(self, msg)) resume_if_synced(self);
          } else if (env.isRefusal()) on_refusal(self, msg);
          else if (env.isStateHeld()) on_held(self, *msg);
          else if (env.isInnerStateRequest()) lend_inner_state(self, *msg);
          else if (env.isInnerStateReply()) {
            if (on_inner_state_reply(self, msg)) resume_if_synced(self);
          } else if (env.isDataLease()) on_data_lease(self, msg);
          else if (env.isShutdown()) self->quit();
        });
      },
      [=](step_atom) {
        if (self->state.current == phase::training) self->state.steps->step(self);
      },
      [=](tick_atom) {
        auto& st = self->state;
        if (st.current == phase::finished) return;
        for (std::size_t f = 0; f < st.fragments.size(); ++f)
          repeat(self, f, st.fragments[f].on_tick(st.now(), state_retry, result_timeout(st.cfg.run)));
        // A state adopted while a skip was on its way (a re-placed coordinator's announcement)
        // may leave a unit behind the step again: said again here, at most once a tick.
        if (st.step > 0 && (st.current == phase::training || st.current == phase::blocked))
          for (std::size_t f = 0; f < st.fragments.size(); ++f) skip_rounds_started_past(self, f);
        if (warm_tick(self, state_retry)) resume_if_synced(self);
        data_tick(self);
        self->delayed_send(self, state_retry, tick_atom::value);
      },
      [=](resend_atom) {  // the node's link to the head dropped: what we sent may be lost
        auto& st = self->state;
        if (st.current == phase::finished || !st.steps->recovers_rounds()) return;
        for (std::size_t f = 0; f < st.fragments.size(); ++f) repeat(self, f, st.fragments[f].on_link_restored());
      },
      [=](stop_atom) { self->quit(); },
  };
}

}  // namespace atl
