#include "actors/coordinator/coordinator.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/coordinator/commit.hpp"
#include "actors/coordinator/results.hpp"
#include "actors/coordinator/startup.hpp"
#include "actors/decisions/held_requests.hpp"
#include "actors/decisions/placement.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/shared/guarded_handler.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "actors/shared/slicing.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace coordinator_detail {
namespace {

void on_contribution(self_ptr self, const wire::message_ptr& msg);
void act_on(self_ptr self, const round_commit::effects& effects);

// The round's machine's policy, from the coordinator's configuration.
round_collect::options round_collect_options_of(const coordinator_config& cfg) {
  round_collect::options opt;
  opt.quorum = {cfg.min_workers, cfg.round_deadline};
  opt.quorum.adaptive = cfg.adaptive_close;
  opt.quorum.grace_k = cfg.grace_k;
  opt.quorum.grace_min = cfg.grace_min;
  opt.quorum.grace_max = cfg.grace_max;
  opt.keep_late_work = cfg.keep_late_work;
  return opt;
}

std::uint64_t held_digest_of(const wire::message& state_request) {
  return state_request.envelope().getStateRequest().getHeldDigest();
}

// An unseeded run: the first held request that carries parameters becomes round 0.
void seed_from_waiting(self_ptr self) {
  auto& st = self->state;
  if (!st.loaded() || st.rounds->current_phase() != round_tracker::phase::unseeded) return;
  for (const auto& held : st.collect->waiting()) {
    const auto req = std::static_pointer_cast<const wire::message>(held.message);
    if (req->tensors().size() != 1 || req->tensors()[0].dtype != schema::DType::FLOAT32) continue;
    if (auto err = st.rounds->seed(req->tensors()[0].to_floats())) {
      log_warn(fragment_name(st) + ": cannot seed from " + req->sender() + ": " + err.describe());
      continue;
    }
    act_on(self, start_commit(st));
    return;
  }
}

void on_round_complete(self_ptr self);

// What the round's machine asked for (actors/decisions/round_collect.hpp), in its order.
// `msg`: the contribution the effects are about, if any.
void act_on(self_ptr self, round_collect::effects fx, const wire::message_ptr& msg = nullptr) {
  auto& st = self->state;
  for (const auto& note : fx.notes) log_warn(fragment_name(st) + ": " + note);
  if (fx.opened) {
    st.round_bytes = 0;
    st.round_inputs.clear();
  }
  for (const auto& [worker, held_digest] : fx.answer) send_state(self, worker, held_digest);
  if (fx.arm_deadline) self->delayed_send(self, st.cfg.round_deadline, deadline_atom::value, *fx.arm_deadline);
  if (fx.recheck) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(fx.recheck->second - st.now());
    self->delayed_send(self, std::max(wait, std::chrono::milliseconds(1)), grace_atom::value, fx.recheck->first);
  }
  if (msg && fx.refused) {
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + fx.refused->describe());
    st.mail->refuse(*msg, *fx.refused, refusal_epoch(st));
  }
  if (msg && fx.taken_as) {
    st.round_inputs[*fx.taken_as] = msg;
    st.round_bytes += msg->wire_bytes();
    if (round_tracker::is_late_name(*fx.taken_as))
      log_info(fragment_name(st) + ": round " + std::to_string(msg->envelope().getContribution().getRound()) + " of " +
               msg->sender() + ", late, folded into round " + std::to_string(st.rounds->open_round()));
  }
  if (msg && fx.send_missed_result) send_missed_result(self, msg->sender());
  if (fx.complete) on_round_complete(self);
  for (const auto& held : fx.replay) on_contribution(self, std::static_pointer_cast<const wire::message>(held));
}

// The state is loaded (or none was found): seed a new run, or open the next round.
void on_started(self_ptr self) {
  seed_from_waiting(self);
  act_on(self, self->state.collect->advance());
}

// A released round: reported, then the next round opened (its results carry that round's
// epoch), then the results sent (a confirmation only, if they went out `provisional`).
void release(self_ptr self, const std::vector<std::string>& contributors, bool provisional) {
  const auto released = report_release(self, contributors, provisional);
  act_on(self, self->state.collect->advance());  // it resets the round's counters
  send_released(self, released);
}

// A round has every contribution: commit it (DiLoCo) or release the average (ddp).
void on_round_complete(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->rule() == round_tracker::update_rule::nesterov) {
    act_on(self, start_commit(st));
    return;
  }
  const auto contributors = st.rounds->contributors();
  st.released_inputs = st.rounds->inputs();  // for its report; committed() recycles them
  (void)st.rounds->committed();
  release(self, contributors, false);
}

// Held, taken late, or taken (actors/decisions/round_collect.hpp decides): decoded here.
void on_contribution(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto c = msg->envelope().getContribution();
  auto admitted = st.collect->admit({msg->sender(), c.getRound(), msg});
  using verdict = held_requests::contribution_verdict;
  if (admitted.verdict == verdict::hold_early || admitted.verdict == verdict::skip_open_round)
    return act_on(self, std::move(admitted.then), msg);
  const auto arrived = st.now();
  // int8 and fp4 stay encoded: the outer step decodes them block by block (a quarter or an
  // eighth of the bytes to hold, and no fp32 pass over each on the round's critical path).
  round_collect::contribution_values values;
  values.epoch = msg->epoch();
  values.weight = c.getWeight();
  values.is_encoded = has_scales(static_cast<codec_kind>(c.getCodec()));
  if (values.is_encoded) values.encoded = st.rounds->encoded_buffer();
  else values.decoded = st.rounds->contribution_buffer();
  const std::size_t count = st.rounds->theta().size();
  if (auto err = values.is_encoded ? take_encoded_contribution(*msg, count, values.encoded)
                                   : take_contribution(*msg, count, values.decoded)) {
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + err.describe());
    st.mail->refuse(*msg, err, refusal_epoch(st));
    return;
  }
  const bool late = admitted.verdict == verdict::take_late;
  act_on(self, st.collect->take(msg->sender(), c.getRound(), std::move(values), late, arrived), msg);
}

// A delta that left a gap: the whole Membership is asked for, at most once this often (the
// deltas that keep coming meanwhile would each ask again).
constexpr auto membership_ask_interval = std::chrono::milliseconds(500);

void on_membership(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  switch (st.membership.apply(read_membership(msg->envelope().getMembership()))) {
    case held_membership::verdict::unchanged: return;
    case held_membership::verdict::needs_whole:
      if (!st.membership_asked || st.now() - *st.membership_asked >= membership_ask_interval) {
        st.membership_asked = st.now();
        request_membership(self);
      }
      return;
    case held_membership::verdict::changed: break;
  }
  const auto& view = st.membership.view();
  const bool first = !st.has_membership();
  st.collect->membership({view.epoch, view.workers, view.quorum});
  // The keepers a commit needs (its unit's keeper group's). A keeper removed (its node
  // died) no longer holds a round up; one added gets the committing round at the next tick.
  auto keepers = keepers_of_unit(view, st.cfg.fragment);
  if (keepers.empty()) keepers.push_back(st.cfg.keeper);
  const auto commit_effects = st.commit.set_keepers(std::move(keepers));
  if (first) request_startup_state(self);  // now the keepers
  // One removed may have been awaited.
  if (st.cfg.load_from_every_keeper && resume_when_every_keeper_answered(self)) on_started(self);
  // One removed may have been the last the committing round waited for, or the one not
  // yet writing it.
  act_on(self, commit_effects);
  act_on(self, st.collect->members_changed(st.now()));
}

// Every keeper has the committing round on disk: it is committed. Round 0 (the seed) opens
// the first round; any other is released to its contributors.
void finish_commit(self_ptr self) {
  auto& st = self->state;
  const bool provisional = st.commit.settle() == round_commit::results::provisional;
  const auto round = st.rounds->committed_round();
  const auto contributors = st.rounds->contributors();
  st.released_inputs = st.rounds->inputs();  // for its report; committed() recycles them
  (void)st.rounds->committed();
  if (round > 0) ATL_FAULT_POINT("coordinator.committed");
  if (round == 0) {
    st.commit_frames.reset();  // no result shares the seed's frames
    log_info(fragment_name(st) + ": seeded round 0 (" + std::to_string(st.rounds->theta().size()) + " parameters)");
    act_on(self, st.collect->advance());
    return;
  }
  release(self, contributors, provisional);
}

// What the committing round's machine asked for (actors/decisions/round_commit.hpp), in
// its order: the round to keepers, the provisional result, the release.
void act_on(self_ptr self, const round_commit::effects& effects) {
  auto& st = self->state;
  send_commit(st, effects.send_to);
  if (effects.send_provisional) send_provisional_results(self);
  if (effects.committed) finish_commit(self);
}

// A held StateRequest is answered with StateHeld, so that rank 0 stops attaching its
// parameters (F bytes every retry, on a slow link) once the fragment can be seeded without.
void say_held(self_ptr self, const wire::message& request) {
  auto& st = self->state;
  const bool seeded = st.loaded() && st.rounds->current_phase() != round_tracker::phase::unseeded;
  wire::outgoing out;
  auto held = out.envelope.initStateHeld();
  held.setFragment(st.cfg.fragment);
  held.setSeedHeld(seeded || st.collect->holds_parameters());
  st.mail->send(request.sender(), st.epoch(), out);
}

void on_state_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  // Answered now if the worker can contribute to the open round, or must train to reach
  // another fragment's; otherwise held until a round opens that includes it, so a joiner or
  // a resyncing worker is never refused as not_participant in a loop.
  const auto skips = msg->envelope().getStateRequest().getSkipsRound();
  auto answer = st.collect->request({msg->sender(), skips, held_digest_of(*msg), msg->tensors().size(), msg});
  if (answer.held) {
    seed_from_waiting(self);
    say_held(self, *msg);
  }
  act_on(self, std::move(answer.then));
}

}  // namespace
}  // namespace coordinator_detail

using namespace coordinator_detail;

caf::behavior coordinator_actor(caf::stateful_actor<coordinator_state>* self, transport* net, std::string cluster_id,
                                coordinator_config cfg) {
  auto& st = self->state;
  st.cfg = cfg;
  st.clock = &self->clock();
  st.commit.set_keepers({cfg.keeper});  // until the Membership names them
  st.mail = std::make_unique<mailer>(*net, coordinator_id(cfg.fragment), cluster_id);
  st.rounds = std::make_unique<round_tracker>(
      cfg.fragment, cfg.outer,
      cfg.average_only ? round_tracker::update_rule::average_only : round_tracker::update_rule::nesterov);
  st.rounds->encode_results(cfg.result_codec, cfg.result_chunk, cfg.state_follows_result);
  st.collect = std::make_unique<round_collect>(*st.rounds, round_collect_options_of(cfg));
  request_startup_state(self);
  self->delayed_send(self, cfg.commit_retry, tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        guarded(*self->state.mail, *msg, self->state.epoch(), "coordinator.handler", [&] {
          auto& st = self->state;
          const auto env = msg->envelope();
          if (env.isStateRequest()) on_state_request(self, msg);
          else if (env.isContribution()) on_contribution(self, msg);
          else if (env.isCommitAck()) act_on(self, on_commit_ack(st, *msg));
          else if (env.isLoadReply()) {
            if (on_load_reply(self, msg)) on_started(self);
          } else if (env.isMembership()) on_membership(self, msg);
          else if (env.isRoundReportAck()) on_round_report_ack(self, msg);
          else if (env.isRefusal()) {
            log_warn(fragment_name(st) + ": refusal from " + msg->sender() + ": " +
                     env.getRefusal().getMessage().cStr());
          } else {
            st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.epoch());
          }
        });
      },
      [=](deadline_atom, std::uint64_t round) {
        act_on(self, self->state.collect->deadline(round, self->state.now()));
      },
      [=](grace_atom, std::uint64_t round) { act_on(self, self->state.collect->grace(round, self->state.now())); },
      [=](confirm_atom) { request_membership(self); },  // placed again: a restarted head learns we run
      [=](resend_atom) { resend_round_report(self); },  // the node's link to the head came back
      [=](tick_atom) {  // every commit_retry: startup requests until answered, commit retries
        auto& st = self->state;
        if (!st.loaded()) request_startup_state(self);  // members, then the committed state
        // A commit not acknowledged for a whole tick: refused, or the request or its ack
        // was lost (a head that died). The keeper acknowledges a repeat of the same bytes.
        const auto retry = st.commit.tick(st.now(), st.cfg.commit_retry);
        if (!retry.send_to.empty())
          log_debug(fragment_name(st) + ": round " + std::to_string(st.commit.round()) +
                    " not acknowledged by every keeper; sending it again (try " + std::to_string(st.commit.tries()) +
                    ")");
        act_on(self, retry);
        if (st.has_membership()) report_progress(self);
        resend_round_report_if_due(self);
        self->delayed_send(self, st.cfg.commit_retry, tick_atom::value);
      },
  };
}

}  // namespace atl
