#include "actors/coordinator/coordinator.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/coordinator/closing.hpp"
#include "actors/coordinator/commit.hpp"
#include "actors/coordinator/facts.hpp"
#include "actors/coordinator/results.hpp"
#include "actors/coordinator/startup.hpp"
#include "actors/decisions/held_requests.hpp"
#include "actors/decisions/placement.hpp"
#include "actors/decisions/quorum.hpp"
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

// In phase ready with enough members: open the next round, give the committed state to
// the held requests of its participants (the others wait for a round that includes them:
// a worker that is not a participant could not contribute; but see actors/decisions/held_requests.hpp),
// then replay contributions that came before the round opened.
void advance(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::ready || !membership_ready(st)) return;
  if (auto err = st.rounds->open(st.epoch, st.members)) {
    log_warn(fragment_name(st) + ": cannot open round: " + err.describe());
    return;
  }
  st.round_bytes = 0;
  st.left_out.clear();
  st.round_inputs.clear();
  std::vector<wire::message_ptr> still_waiting;
  for (const auto& req : st.waiting) {
    const auto verdict = held_requests::decide(state_request_facts_of(st, *req, membership_ready(st)));
    if (verdict == held_requests::state_verdict::answer_in_round) {
      send_state(self, req->sender(), held_digest_of(*req));
      continue;
    }
    // The others wait on, and one that skips this round is left out of it (opened with no
    // contribution yet, it cannot complete here).
    if (verdict == held_requests::state_verdict::skip_and_hold) (void)leave_out(self, *req);
    still_waiting.push_back(req);
  }
  if (st.announce_on_open) {
    for (const auto& worker : st.members)
      if (std::none_of(st.waiting.begin(), st.waiting.end(),
                       [&](const wire::message_ptr& held) { return held->sender() == worker; }))
        send_state(self, worker, 0);
    st.announce_on_open = false;
  }
  st.waiting = std::move(still_waiting);
  auto early = std::move(st.early);
  st.early.clear();
  for (const auto& [_, msg] : early) on_contribution(self, msg);
}

// An unseeded run: the first held request that carries parameters becomes round 0.
void seed_from_waiting(self_ptr self) {
  auto& st = self->state;
  if (!st.loaded() || st.rounds->current_phase() != round_tracker::phase::unseeded) return;
  for (const auto& req : st.waiting) {
    if (req->tensors().size() != 1 || req->tensors()[0].dtype != schema::DType::FLOAT32) continue;
    if (auto err = st.rounds->seed(req->tensors()[0].to_floats())) {
      log_warn(fragment_name(st) + ": cannot seed from " + req->sender() + ": " + err.describe());
      continue;
    }
    act_on(self, start_commit(st));
    return;
  }
}

// The state is loaded (or none was found): seed a new run, or open the next round.
void on_started(self_ptr self) {
  seed_from_waiting(self);
  advance(self);
}

// A released round: reported, then the next round opened (its results carry that round's
// epoch), then the results sent (a confirmation only, if they went out `provisional`).
void release(self_ptr self, const std::vector<std::string>& contributors, bool provisional) {
  const auto released = report_release(self, contributors, provisional);
  advance(self);  // it resets the round's counters
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

void on_contribution(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto c = msg->envelope().getContribution();
  // Held, one per sender, until the next round opens: for the round about to open (its
  // membership is not ready yet; a worker that got the last result contributes at once), or
  // anything before this coordinator has loaded its state (a re-placed one, receiving
  // resends). actors/decisions/held_requests.hpp decides.
  auto facts = contribution_facts_of(st, *msg);
  bool late = false;
  switch (held_requests::decide(facts)) {
    case held_requests::contribution_verdict::hold_early: st.early[msg->sender()] = msg; return;
    case held_requests::contribution_verdict::skip_open_round:
      if (skip_open_round(self, msg)) on_round_complete(self);
      return;
    case held_requests::contribution_verdict::take_late: late = true; break;
    case held_requests::contribution_verdict::take: break;
  }
  const auto arrived = st.now();
  // int8 and fp4 stay encoded: the outer step decodes them block by block (a quarter or an
  // eighth of the bytes to hold, and no fp32 pass over each on the round's critical path).
  const bool keep_encoded = has_scales(static_cast<codec_kind>(c.getCodec()));
  std::vector<float> values;
  encoded_values encoded;
  if (keep_encoded) encoded = st.rounds->encoded_buffer();
  else values = st.rounds->contribution_buffer();
  const std::size_t count = st.rounds->theta().size();
  if (auto err =
          keep_encoded ? take_encoded_contribution(*msg, count, encoded) : take_contribution(*msg, count, values)) {
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + err.describe());
    st.mail->refuse(*msg, err, refusal_epoch(st));
    return;
  }
  if (late) {
    if (take_late_work(self, msg, std::move(values), std::move(encoded))) on_round_complete(self);
    return;
  }
  if (st.rounds->contributors().empty()) {
    st.round_started = st.now();
    st.arrivals.clear();
    if (st.cfg.round_deadline.count() > 0)
      self->delayed_send(self, st.cfg.round_deadline, deadline_atom::value, st.rounds->open_round());
  }
  auto done = keep_encoded
                  ? st.rounds->add_encoded(msg->sender(), msg->epoch(), c.getRound(), std::move(encoded), c.getWeight())
                  : st.rounds->add(msg->sender(), msg->epoch(), c.getRound(), std::move(values), c.getWeight());
  if (done) st.round_inputs[msg->sender()] = msg;
  if (!done) {
    if (done.err().code == errc::not_participant) st.left_out.insert(msg->sender());
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + done.err().describe());
    st.mail->refuse(*msg, done.err(), refusal_epoch(st));
    return;
  }
  st.round_bytes += msg->wire_bytes();
  st.last_contribution = arrived;
  st.arrivals.push_back(arrived - st.round_started);
  if (*done) return on_round_complete(self);
  if (st.cfg.adaptive_close && close_or_wait(self, st.rounds->open_round())) on_round_complete(self);
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
  st.epoch = view.epoch;
  st.members = view.workers;
  st.quorum = view.quorum;
  const bool first = !st.has_membership();
  if (first) st.started_as = coordinator_state::startup::loading;
  // The keepers a commit needs. A keeper removed (its node died) no longer holds a round
  // up; one added gets the committing round at the next tick.
  auto keepers = view.keepers;
  if (keepers.empty()) keepers.push_back(st.cfg.keeper);
  const auto commit_effects = st.commit.set_keepers(std::move(keepers));
  if (first) request_startup_state(self);  // now the keepers
  // One removed may have been awaited.
  if (st.cfg.load_from_every_keeper && resume_when_every_keeper_answered(self)) on_started(self);
  // One removed may have been the last the committing round waited for, or the one not
  // yet writing it.
  act_on(self, commit_effects);
  if (st.rounds->current_phase() == round_tracker::phase::collecting) {
    const auto participants = st.rounds->participants();
    for (const auto& p : participants) {
      if (std::find(st.members.begin(), st.members.end(), p) != st.members.end()) continue;
      log_warn(fragment_name(st) + ": " + p + " left; round " + std::to_string(st.rounds->open_round()) +
               " goes on without it");
      auto done = st.rounds->drop(p);
      if (done && *done) on_round_complete(self);
    }
    // Fewer participants, a smaller majority: it may be in, and its grace may have passed.
    if (st.cfg.adaptive_close && close_or_wait(self, st.rounds->open_round())) on_round_complete(self);
  }
  advance(self);
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
    advance(self);
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
  const bool parameters_held = std::any_of(st.waiting.begin(), st.waiting.end(),
                                           [](const wire::message_ptr& held) { return !held->tensors().empty(); });
  wire::outgoing out;
  auto held = out.envelope.initStateHeld();
  held.setFragment(st.cfg.fragment);
  held.setSeedHeld(seeded || parameters_held);
  st.mail->send(request.sender(), st.epoch, out);
}

void on_state_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  // Answered now if the worker can contribute to the open round, or must train to reach
  // another fragment's (actors/decisions/held_requests.hpp); otherwise held until a round opens that
  // includes it, so a joiner or a resyncing worker is never refused as not_participant in
  // a loop.
  const auto verdict = held_requests::decide(state_request_facts_of(st, *msg, membership_ready(st)));
  if (verdict == held_requests::state_verdict::answer_in_round ||
      verdict == held_requests::state_verdict::answer_outside_round) {
    send_state(self, msg->sender(), held_digest_of(*msg));
    return;
  }
  // One held request per worker: its retries replace it, so it is answered once.
  auto same = std::find_if(st.waiting.begin(), st.waiting.end(),
                           [&](const wire::message_ptr& held) { return held->sender() == msg->sender(); });
  if (same == st.waiting.end()) st.waiting.push_back(msg);
  else if (msg->tensors().size() >= (*same)->tensors().size()) *same = msg;  // keep the one with parameters
  seed_from_waiting(self);
  say_held(self, *msg);
  if (verdict == held_requests::state_verdict::skip_and_hold && leave_out(self, *msg)) on_round_complete(self);
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
  st.rounds->encode_results(cfg.result_codec, cfg.result_chunk);
  request_startup_state(self);
  self->delayed_send(self, cfg.commit_retry, tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
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
          log_warn(fragment_name(st) + ": refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
        } else {
          st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.epoch);
        }
      },
      [=](deadline_atom, std::uint64_t round) {
        if (on_deadline(self, round)) on_round_complete(self);
      },
      [=](grace_atom, std::uint64_t round) {
        if (close_or_wait(self, round)) on_round_complete(self);
      },
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
