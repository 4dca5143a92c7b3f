// When an open round closes without every participant (actors/decisions/quorum.hpp asked
// with this coordinator's facts): at its deadline (diloco.round_deadline_ms) or once its
// adaptive grace passed (diloco.round_close = adaptive), given a quorum and a majority; a
// participant that skipped it (its next round's contribution came, or it said so); and the
// late work of one it closed without.
#include "actors/coordinator/closing.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/coordinator/results.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "runtime/process/log.hpp"

namespace atl::coordinator_detail {
namespace {

// What the quorum policy (actors/decisions/quorum.hpp) is asked about this fragment.
quorum::view policy_view(const coordinator_state& st) {
  quorum::view v;
  v.has_membership = st.has_membership();
  v.members = st.members.size();
  v.published = st.quorum;
  v.round_open = st.rounds->current_phase() == round_tracker::phase::collecting;
  if (v.round_open) {
    v.participants = st.rounds->participants().size();
    v.contributed = st.rounds->contributor_count();
    if (v.contributed > 0) {
      v.first_contribution = st.round_started;
      if (st.cfg.adaptive_close) v.arrivals = st.arrivals;  // read by the grace only: no copy otherwise
    }
  }
  return v;
}

quorum::options policy_options(const coordinator_state& st) {
  quorum::options opt{st.cfg.min_workers, st.cfg.round_deadline};
  opt.adaptive = st.cfg.adaptive_close;
  opt.grace_k = st.cfg.grace_k;
  opt.grace_min = st.cfg.grace_min;
  opt.grace_max = st.cfg.grace_max;
  return opt;
}

}  // namespace

bool membership_ready(const coordinator_state& st) {
  return quorum::members_suffice(policy_view(st), policy_options(st));
}

// Asks the quorum policy about open round `round`: closes it (true: the caller commits
// it), or, within an adaptive grace, looks again when the grace ends (a contribution
// meanwhile asks again).
bool close_or_wait(self_ptr self, std::uint64_t round) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::collecting || st.rounds->open_round() != round) return false;
  const auto participants = st.rounds->participants().size();
  const auto contributed = st.rounds->contributor_count();
  const auto verdict = quorum::decide(policy_view(st), policy_options(st), st.now());
  if (verdict.recheck_at) {
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(*verdict.recheck_at - st.now());
    self->delayed_send(self, std::max(wait, std::chrono::milliseconds(1)), grace_atom::value, round);
  }
  expected<bool> done = false;
  if (verdict.what == quorum::decision::close) done = st.rounds->close_at_deadline(verdict.needed);
  if (!done || !*done) return false;
  log_warn(fragment_name(st) + ": round " + std::to_string(round) + " closed (" + quorum::to_string(verdict.why) +
           ") with " + std::to_string(contributed) + " of " + std::to_string(participants) + " participants");
  return true;
}

// Round `round` is round_deadline old. The quorum policy closes it with the contributions
// it has if they are a quorum and a majority of its participants (no split brain);
// otherwise the deadline is looked at again later.
bool on_deadline(self_ptr self, std::uint64_t round) {
  if (close_or_wait(self, round)) return true;
  self->delayed_send(self, self->state.cfg.round_deadline, deadline_atom::value, round);
  return false;
}

// A participant of the collecting round sent the round after it: it started past this round
// (a warm joiner that adopted another slice of the fragment a round ahead) and will never
// send it. The round goes on without it rather than waiting for ever; its contribution
// waits for the next round, which includes it.
bool skip_open_round(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto round = st.rounds->open_round();
  log_warn(fragment_name(st) + ": " + msg->sender() + " sent round " + std::to_string(round + 1) + " without round " +
           std::to_string(round) + "; round " + std::to_string(round) + " goes on without it");
  st.early[msg->sender()] = msg;
  auto done = st.rounds->drop(msg->sender());
  return done && *done;
}

// A participant of the collecting round said, asking for the state, that it starts past
// this round (held_requests: skip_and_hold). The round goes on without it; its requests
// are held until a round that includes it opens.
bool leave_out(self_ptr self, const wire::message& request) {
  auto& st = self->state;
  const auto round = st.rounds->open_round();
  log_warn(fragment_name(st) + ": " + request.sender() + " starts past round " + std::to_string(round) + "; round " +
           std::to_string(round) + " goes on without it");
  st.left_out.insert(request.sender());
  auto done = st.rounds->drop(request.sender());
  return done && *done;
}

// Late work (round_tracker::add_late): the round before the open one closed without its
// sender, whose contribution to it is folded into the open round. The sender then gets the
// result it missed and merges it, keeping what it trained since, instead of resyncing.
bool take_late_work(self_ptr self, const wire::message_ptr& msg, std::vector<float> values, encoded_values encoded) {
  auto& st = self->state;
  const auto c = msg->envelope().getContribution();
  const bool keep_encoded = has_scales(static_cast<codec_kind>(c.getCodec()));
  auto done =
      keep_encoded
          ? st.rounds->add_late_encoded(msg->sender(), msg->epoch(), c.getRound(), std::move(encoded), c.getWeight())
          : st.rounds->add_late(msg->sender(), msg->epoch(), c.getRound(), std::move(values), c.getWeight());
  if (!done && done.err().code == errc::duplicate) {
    // A resend: the result it missed was lost on the way (the resend says it still waits).
    send_missed_result(self, msg->sender());
    return false;
  }
  if (!done) {
    log_warn(fragment_name(st) + ": refused late work of " + msg->sender() + ": " + done.err().describe());
    st.mail->refuse(*msg, done.err(), refusal_epoch(st));
    return false;
  }
  st.round_inputs[round_tracker::late_name(msg->sender())] = msg;
  st.round_bytes += msg->wire_bytes();
  log_info(fragment_name(st) + ": round " + std::to_string(c.getRound()) + " of " + msg->sender() +
           ", late, folded into round " + std::to_string(st.rounds->open_round()));
  send_missed_result(self, msg->sender());
  return *done;
}

}  // namespace atl::coordinator_detail
