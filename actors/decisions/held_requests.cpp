#include "actors/decisions/held_requests.hpp"

namespace atl::held_requests {

state_verdict decide(const state_request_facts& f) {
  const bool skips_its_round = f.collecting && f.participant && !f.contributed && f.skips_open_round;
  if (f.loaded && skips_its_round && f.participants > 1) return state_verdict::skip_and_hold;
  if (f.wants_newer_state && !skips_its_round) return state_verdict::hold;
  if (f.loaded && f.members_suffice && f.collecting && f.participant && !f.contributed)
    return state_verdict::answer_in_round;
  if (f.loaded && f.nesterov && f.collecting && f.member && !f.participant && !f.left_out)
    return state_verdict::answer_outside_round;
  return state_verdict::hold;
}

contribution_verdict decide(const contribution_facts& f) {
  const bool about_to_open = f.ready && f.for_next_round && f.member;
  const bool starting = !f.loaded || !f.seeded;
  const bool room = f.sender_held || f.held < max_early;
  if (f.collecting && f.for_round_after_open && f.participant && !f.contributed && f.participants > 1 && room)
    return contribution_verdict::skip_open_round;
  if (f.collecting && f.for_round_before_open && f.participant && f.keep_late) return contribution_verdict::take_late;
  return (about_to_open || starting) && room ? contribution_verdict::hold_early : contribution_verdict::take;
}

const char* to_string(state_verdict v) {
  switch (v) {
    case state_verdict::skip_and_hold: return "skip_and_hold";
    case state_verdict::answer_in_round: return "answer_in_round";
    case state_verdict::answer_outside_round: return "answer_outside_round";
    case state_verdict::hold: return "hold";
  }
  return "unknown";
}

const char* to_string(contribution_verdict v) {
  switch (v) {
    case contribution_verdict::hold_early: return "hold_early";
    case contribution_verdict::skip_open_round: return "skip_open_round";
    case contribution_verdict::take_late: return "take_late";
    case contribution_verdict::take: return "take";
  }
  return "unknown";
}

}  // namespace atl::held_requests
