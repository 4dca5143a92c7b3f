#include "actors/decisions/round_collect.hpp"

#include <algorithm>

namespace atl {
namespace {

// A tracker's answer that says the round is complete (an error says it is not).
bool completes(const expected<bool>& done) { return done && *done; }

}  // namespace

void round_collect::membership(membership_view view) {
  epoch_ = view.epoch;
  members_ = std::move(view.workers);
  quorum_ = view.quorum;
  if (startup_ == startup::asking_members) startup_ = startup::loading;
}

round_collect::effects round_collect::members_changed(time_point now) {
  effects fx;
  if (rounds_->current_phase() == round_tracker::phase::collecting) {
    const auto participants = rounds_->participants();
    for (const auto& p : participants) {
      if (is_member(p)) continue;
      fx.notes.push_back(p + " left; round " + std::to_string(rounds_->open_round()) + " goes on without it");
      if (completes(rounds_->drop(p))) fx.complete = true;
    }
    // Fewer participants, a smaller majority: it may be in, and its grace may have passed.
    if (opt_.quorum.adaptive) close_or_wait(rounds_->open_round(), now, fx);
  }
  open_next(fx);
  return fx;
}

void round_collect::loaded(bool resumed) {
  startup_ = startup::started;
  announce_on_open_ = resumed;
}

round_collect::effects round_collect::advance() {
  effects fx;
  open_next(fx);
  return fx;
}

void round_collect::open_next(effects& fx) {
  if (!loaded() || rounds_->current_phase() != round_tracker::phase::ready || !members_suffice()) return;
  if (auto err = rounds_->open(epoch_, members_)) {
    fx.notes.push_back("cannot open round: " + err.describe());
    return;
  }
  fx.opened = true;
  left_out_.clear();
  // Held requests of its participants are answered; the others wait for a round that
  // includes them (one that skips this round is left out of it: opened with no
  // contribution yet, the round cannot complete here).
  std::vector<state_request> still_waiting;
  for (auto& req : waiting_) {
    const auto verdict = held_requests::decide(facts_of(req));
    if (verdict == held_requests::state_verdict::answer_in_round) {
      fx.answer.emplace_back(req.sender, req.held_digest);
      continue;
    }
    if (verdict == held_requests::state_verdict::skip_and_hold) fx.complete |= leave_out(req.sender, fx);
    still_waiting.push_back(std::move(req));
  }
  // Resumed: every member gets the committed state, so workers still waiting on the old
  // coordinator's result resync at once instead of after diloco.result_timeout_ms.
  if (announce_on_open_) {
    for (const auto& worker : members_)
      if (std::none_of(waiting_.begin(), waiting_.end(), [&](const state_request& r) { return r.sender == worker; }))
        fx.answer.emplace_back(worker, 0);
    announce_on_open_ = false;
  }
  waiting_ = std::move(still_waiting);
  for (auto& [_, msg] : early_) fx.replay.push_back(std::move(msg));
  early_.clear();
}

round_collect::admission round_collect::admit(const contribution& c) {
  admission a{held_requests::decide(facts_of(c)), {}};
  switch (a.verdict) {
    case held_requests::contribution_verdict::hold_early: early_[c.sender] = c.message; break;
    case held_requests::contribution_verdict::skip_open_round: {
      // It started past the open round (a warm joiner whose other slices of the fragment
      // were a round ahead) and will never send it: its contribution waits for the next.
      const auto round = rounds_->open_round();
      a.then.notes.push_back(c.sender + " sent round " + std::to_string(round + 1) + " without round " +
                             std::to_string(round) + "; round " + std::to_string(round) + " goes on without it");
      early_[c.sender] = c.message;
      a.then.complete = completes(rounds_->drop(c.sender));
      break;
    }
    case held_requests::contribution_verdict::take_late:
    case held_requests::contribution_verdict::take: break;
  }
  return a;
}

round_collect::effects round_collect::take(const std::string& sender, std::uint64_t round, contribution_values values,
                                           bool late, time_point now) {
  effects fx;
  if (late) take_late(sender, round, std::move(values), fx);
  else take_on_time(sender, round, std::move(values), now, fx);
  return fx;
}

void round_collect::take_on_time(const std::string& sender, std::uint64_t round, contribution_values values,
                                 time_point now, effects& fx) {
  if (rounds_->contributor_count() == 0) {  // the round's first (no list built)
    round_started_ = now;
    arrivals_.clear();
    if (opt_.quorum.round_deadline.count() > 0) fx.arm_deadline = rounds_->open_round();
  }
  auto done = values.is_encoded
                  ? rounds_->add_encoded(sender, values.epoch, round, std::move(values.encoded), values.weight)
                  : rounds_->add(sender, values.epoch, round, std::move(values.decoded), values.weight);
  if (!done) {
    if (done.err().code == errc::not_participant) left_out_.insert(sender);
    fx.refused = done.err();
    return;
  }
  fx.taken_as = sender;
  last_contribution_ = now;
  arrivals_.push_back(now - round_started_);
  if (*done) fx.complete = true;
  else if (opt_.quorum.adaptive) close_or_wait(rounds_->open_round(), now, fx);
}

// Late work (round_tracker::add_late): the round before the open one closed without its
// sender, whose contribution to it is folded into the open round. The sender then gets the
// result it missed and merges it, keeping what it trained since, instead of resyncing.
void round_collect::take_late(const std::string& sender, std::uint64_t round, contribution_values values, effects& fx) {
  auto done = values.is_encoded
                  ? rounds_->add_late_encoded(sender, values.epoch, round, std::move(values.encoded), values.weight)
                  : rounds_->add_late(sender, values.epoch, round, std::move(values.decoded), values.weight);
  if (!done && done.err().code == errc::duplicate) {
    fx.send_missed_result = true;  // a resend: the result it missed was lost on the way
    return;
  }
  if (!done) {
    fx.refused = done.err();
    return;
  }
  fx.taken_as = round_tracker::late_name(sender);
  fx.send_missed_result = true;
  fx.complete = *done;
}

round_collect::request_answer round_collect::request(const state_request& r) {
  request_answer a;
  const auto verdict = held_requests::decide(facts_of(r));
  if (verdict == held_requests::state_verdict::answer_in_round ||
      verdict == held_requests::state_verdict::answer_outside_round) {
    a.then.answer.emplace_back(r.sender, r.held_digest);
    return a;
  }
  // One held request per worker: its retries replace it, so it is answered once; the one
  // with parameters is kept.
  a.held = true;
  auto same =
      std::find_if(waiting_.begin(), waiting_.end(), [&](const state_request& w) { return w.sender == r.sender; });
  if (same == waiting_.end()) waiting_.push_back(r);
  else if (r.tensors >= same->tensors) *same = r;
  if (verdict == held_requests::state_verdict::skip_and_hold) a.then.complete = leave_out(r.sender, a.then);
  return a;
}

round_collect::effects round_collect::deadline(std::uint64_t round, time_point now) {
  effects fx;
  close_or_wait(round, now, fx);
  // Looked at again a deadline later while that round is still open: a round that
  // completed or closed needs no timer (one re-armed for ever per round added a timer per
  // round to a long run).
  const bool still_open =
      rounds_->current_phase() == round_tracker::phase::collecting && rounds_->open_round() == round;
  if (!fx.complete && still_open) fx.arm_deadline = round;
  return fx;
}

round_collect::effects round_collect::grace(std::uint64_t round, time_point now) {
  effects fx;
  close_or_wait(round, now, fx);
  return fx;
}

bool round_collect::members_suffice() const { return quorum::members_suffice(policy_view(), opt_.quorum); }

bool round_collect::holds_parameters() const {
  return std::any_of(waiting_.begin(), waiting_.end(), [](const state_request& r) { return r.tensors > 0; });
}

quorum::view round_collect::policy_view() const {
  quorum::view v;
  v.has_membership = has_membership();
  v.members = members_.size();
  v.published = quorum_;
  v.round_open = rounds_->current_phase() == round_tracker::phase::collecting;
  if (v.round_open) {
    v.participants = rounds_->participants().size();
    v.contributed = rounds_->contributor_count();
    if (v.contributed > 0) {
      v.first_contribution = round_started_;
      if (opt_.quorum.adaptive) v.arrivals = arrivals_;  // read by the grace only: no copy otherwise
    }
  }
  return v;
}

bool round_collect::is_member(const std::string& worker) const {
  return std::find(members_.begin(), members_.end(), worker) != members_.end();
}

held_requests::state_request_facts round_collect::facts_of(const state_request& r) const {
  held_requests::state_request_facts f;
  f.loaded = loaded();
  f.members_suffice = members_suffice();
  f.collecting = rounds_->current_phase() == round_tracker::phase::collecting;
  f.nesterov = rounds_->rule() == round_tracker::update_rule::nesterov;
  f.participant = f.collecting && rounds_->participants().count(r.sender);
  f.contributed = rounds_->has_contributed(r.sender);
  f.member = is_member(r.sender);
  f.left_out = left_out_.count(r.sender) > 0;
  f.skips_open_round = f.collecting && r.skips_round != 0 && r.skips_round >= rounds_->open_round();
  f.wants_newer_state = r.skips_round != 0 && r.skips_round > rounds_->committed_round();
  f.participants = f.collecting ? rounds_->participants().size() : 0;
  return f;
}

held_requests::contribution_facts round_collect::facts_of(const contribution& c) const {
  held_requests::contribution_facts f;
  f.loaded = loaded();
  f.seeded = rounds_->current_phase() != round_tracker::phase::unseeded;
  f.ready = rounds_->current_phase() == round_tracker::phase::ready;
  f.for_next_round = c.round == rounds_->open_round();
  f.member = is_member(c.sender);
  f.sender_held = early_.count(c.sender) > 0;
  f.held = early_.size();
  f.collecting = rounds_->current_phase() == round_tracker::phase::collecting;
  f.for_round_after_open = f.collecting && c.round == rounds_->open_round() + 1;
  f.participant = f.collecting && rounds_->participants().count(c.sender);
  f.participants = f.collecting ? rounds_->participants().size() : 0;
  f.contributed = rounds_->has_contributed(c.sender);
  f.for_round_before_open = f.collecting && c.round + 1 == rounds_->open_round();
  f.keep_late = opt_.keep_late_work;
  return f;
}

// A participant of the collecting round said, asking for the state, that it starts past
// this round: the round goes on without it; its requests are held until a round that
// includes it opens.
bool round_collect::leave_out(const std::string& worker, effects& fx) {
  const auto round = std::to_string(rounds_->open_round());
  fx.notes.push_back(worker + " starts past round " + round + "; round " + round + " goes on without it");
  left_out_.insert(worker);
  return completes(rounds_->drop(worker));
}

// Asks the quorum policy about open round `round`: closed (complete), or, within an
// adaptive grace, looked at again when the grace ends (a contribution meanwhile asks again).
void round_collect::close_or_wait(std::uint64_t round, time_point now, effects& fx) {
  if (rounds_->current_phase() != round_tracker::phase::collecting || rounds_->open_round() != round) return;
  const auto participants = rounds_->participants().size();
  const auto contributed = rounds_->contributor_count();
  const auto verdict = quorum::decide(policy_view(), opt_.quorum, now);
  if (verdict.recheck_at) fx.recheck = std::make_pair(round, *verdict.recheck_at);
  if (verdict.what != quorum::decision::close) return;
  auto done = rounds_->close_at_deadline(verdict.needed);
  if (!done || !*done) return;
  fx.notes.push_back("round " + std::to_string(round) + " closed (" + quorum::to_string(verdict.why) + ") with " +
                     std::to_string(contributed) + " of " + std::to_string(participants) + " participants");
  fx.complete = true;
}

const char* to_string(round_collect::startup s) {
  switch (s) {
    case round_collect::startup::asking_members: return "asking_members";
    case round_collect::startup::loading: return "loading";
    case round_collect::startup::started: return "started";
  }
  return "unknown";
}

}  // namespace atl
