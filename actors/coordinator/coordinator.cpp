#include "actors/coordinator/coordinator.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/coordinator/internal.hpp"
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

std::string fragment_name(const coordinator_state& st) { return "coordinator " + std::to_string(st.cfg.fragment); }

std::uint64_t held_digest_of(const wire::message& state_request) {
  return state_request.envelope().getStateRequest().getHeldDigest();
}

bool is_participant(const coordinator_state& st, const std::string& worker) {
  return st.rounds->current_phase() == round_tracker::phase::collecting && st.rounds->participants().count(worker);
}

bool is_member(const coordinator_state& st, const std::string& worker) {
  return std::find(st.members.begin(), st.members.end(), worker) != st.members.end();
}

// What actors/decisions/held_requests.hpp decides a StateRequest by.
held_requests::state_request_facts state_request_facts_of(const coordinator_state& st, const wire::message& request) {
  const auto& worker = request.sender();
  const auto skips = request.envelope().getStateRequest().getSkipsRound();
  held_requests::state_request_facts f;
  f.loaded = st.loaded();
  f.members_suffice = membership_ready(st);
  f.collecting = st.rounds->current_phase() == round_tracker::phase::collecting;
  f.nesterov = st.rounds->rule() == round_tracker::update_rule::nesterov;
  f.participant = f.collecting && st.rounds->participants().count(worker);
  f.contributed = st.rounds->has_contributed(worker);
  f.member = is_member(st, worker);
  f.left_out = st.left_out.count(worker) > 0;
  f.skips_open_round = f.collecting && skips != 0 && skips >= st.rounds->open_round();
  f.wants_newer_state = skips != 0 && skips > st.rounds->committed_round();
  f.participants = f.collecting ? st.rounds->participants().size() : 0;
  return f;
}

// The epoch a refusal carries: the open round's, so a worker refused as stale_epoch can
// send the same contribution again in the right epoch.
std::uint64_t refusal_epoch(const coordinator_state& st) {
  return st.rounds->current_phase() == round_tracker::phase::collecting ? st.rounds->open_epoch() : st.epoch;
}

void on_contribution(self_ptr self, const wire::message_ptr& msg);

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
    const auto verdict = held_requests::decide(state_request_facts_of(st, *req));
    if (verdict == held_requests::state_verdict::answer_in_round) {
      send_state(self, req->sender(), held_digest_of(*req));
      continue;
    }
    // The others wait on, and one that skips this round is left out of it (opened with no
    // contribution yet, it cannot complete here).
    if (verdict == held_requests::state_verdict::skip_and_hold) leave_out(self, *req);
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
    start_commit(self);
    return;
  }
}

// A round has every contribution: commit it (DiLoCo) or release the average (ddp).
void on_round_complete(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->rule() == round_tracker::update_rule::nesterov) {
    start_commit(self);
    return;
  }
  const auto contributors = st.rounds->contributors();
  st.released_inputs = st.rounds->inputs();  // for its report; committed() recycles them
  (void)st.rounds->committed();
  release(self, contributors);
}

void on_contribution(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto c = msg->envelope().getContribution();
  // Held, one per sender, until the next round opens: for the round about to open (its
  // membership is not ready yet; a worker that got the last result contributes at once), or
  // anything before this coordinator has loaded its state (a re-placed one, receiving
  // resends). actors/decisions/held_requests.hpp decides.
  held_requests::contribution_facts facts;
  facts.loaded = st.loaded();
  facts.seeded = st.rounds->current_phase() != round_tracker::phase::unseeded;
  facts.ready = st.rounds->current_phase() == round_tracker::phase::ready;
  facts.for_next_round = c.getRound() == st.rounds->open_round();
  facts.member = is_member(st, msg->sender());
  facts.sender_held = st.early.count(msg->sender()) > 0;
  facts.held = st.early.size();
  facts.collecting = st.rounds->current_phase() == round_tracker::phase::collecting;
  facts.for_round_after_open = facts.collecting && c.getRound() == st.rounds->open_round() + 1;
  facts.participant = is_participant(st, msg->sender());
  facts.participants = facts.collecting ? st.rounds->participants().size() : 0;
  facts.contributed = st.rounds->has_contributed(msg->sender());
  facts.for_round_before_open = facts.collecting && c.getRound() + 1 == st.rounds->open_round();
  facts.keep_late = st.cfg.keep_late_work;
  bool late = false;
  switch (held_requests::decide(facts)) {
    case held_requests::contribution_verdict::hold_early: st.early[msg->sender()] = msg; return;
    case held_requests::contribution_verdict::skip_open_round: return skip_open_round(self, msg);
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
  if (late) return take_late_work(self, msg, std::move(values), std::move(encoded));
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
  if (st.cfg.adaptive_close) close_or_wait(self, st.rounds->open_round());
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
  st.commit.set_keepers(std::move(keepers));
  if (first) request_startup_state(self);  // now the keepers
  if (st.cfg.load_from_every_keeper) resume_when_every_keeper_answered(self);  // one removed may have been awaited
  finish_commit_if_acked(self);
  send_provisional_results_once_received(self);  // the keeper not yet writing may be the one removed
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
    if (st.cfg.adaptive_close) close_or_wait(self, st.rounds->open_round());
  }
  advance(self);
}

// Every keeper has the committing round on disk: it is committed. Round 0 (the seed) opens
// the first round; any other is released to its contributors.
void finish_commit_if_acked(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::committing || !st.commit.committed()) return;
  st.commit.finish();
  const auto round = st.rounds->committed_round();
  const auto contributors = st.rounds->contributors();
  st.released_inputs = st.rounds->inputs();  // for its report; committed() recycles them
  (void)st.rounds->committed();
  if (round > 0) ATL_FAULT_POINT("coordinator.committed");
  if (round == 0) {
    st.committing.reset();  // no result shares the seed's frames
    log_info(fragment_name(st) + ": seeded round 0 (" + std::to_string(st.rounds->theta().size()) + " parameters)");
    advance(self);
    return;
  }
  release(self, contributors);
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
  const auto verdict = held_requests::decide(state_request_facts_of(st, *msg));
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

}  // namespace coordinator_detail

using namespace coordinator_detail;

coordinator_config coordinator_config_for(const run_config& run, std::uint32_t fragment) {
  coordinator_config cc;
  cc.fragment = fragment;
  cc.min_workers = static_cast<std::size_t>(run.min_workers);
  cc.outer = {static_cast<float>(run.outer_lr), static_cast<float>(outer_momentum_of(run))};
  cc.average_only = run.mode == "ddp";
  cc.round_deadline = std::chrono::milliseconds(run.round_deadline_ms);
  cc.adaptive_close = run.round_close == "adaptive";
  cc.keep_late_work = run.late_work == "keep";
  cc.grace_k = run.grace_k;
  cc.grace_min = std::chrono::milliseconds(run.grace_min_ms);
  cc.grace_max = std::chrono::milliseconds(run.grace_max_ms);
  cc.state_chunk_values = static_cast<std::size_t>(run.state_chunk_values);
  cc.result_codec = result_codec_of(run);  // fp32 in ddp mode
  cc.result_chunk = static_cast<std::size_t>(run.codec_chunk);
  cc.load_from_every_keeper = run.keepers == "nodes";
  cc.early_results = run.early_results;
  cc.reports_carry_data = run.data_cursor && !cc.average_only;
  return cc;
}

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
        else if (env.isCommitAck()) on_commit_ack(self, msg);
        else if (env.isLoadReply()) on_load_reply(self, msg);
        else if (env.isMembership()) on_membership(self, msg);
        else if (env.isRoundReportAck()) on_round_report_ack(self, msg);
        else if (env.isRefusal()) {
          log_warn(fragment_name(st) + ": refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
        } else {
          st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.epoch);
        }
      },
      [=](deadline_atom, std::uint64_t round) { on_deadline(self, round); },
      [=](grace_atom, std::uint64_t round) { close_or_wait(self, round); },
      [=](confirm_atom) { request_membership(self); },  // placed again: a restarted head learns we run
      [=](resend_atom) { resend_round_report(self); },  // the node's link to the head came back
      [=](tick_atom) {  // every commit_retry: startup requests until answered, commit retries
        auto& st = self->state;
        if (!st.loaded()) request_startup_state(self);  // members, then the committed state
        // A commit not acknowledged for a whole tick: refused, or the request or its ack
        // was lost (a head that died). The keeper acknowledges a repeat of the same bytes.
        if (st.rounds->current_phase() == round_tracker::phase::committing &&
            st.commit.retry_due(st.now(), st.cfg.commit_retry)) {
          log_debug(fragment_name(st) + ": round " + std::to_string(st.rounds->committed_round()) +
                    " not acknowledged by every keeper; sending it again (try " +
                    std::to_string(st.commit.tries() + 1) + ")");
          send_commit(self);
        }
        if (st.has_membership()) report_progress(self);
        resend_round_report_if_due(self);
        self->delayed_send(self, st.cfg.commit_retry, tick_atom::value);
      },
  };
}

}  // namespace atl
