// What the coordinator's pure decisions are asked (actors/coordinator/facts.hpp).
#include "actors/coordinator/facts.hpp"

#include <algorithm>

namespace atl::coordinator_detail {
namespace {

bool is_participant(const coordinator_state& st, const std::string& worker) {
  return st.rounds->current_phase() == round_tracker::phase::collecting && st.rounds->participants().count(worker);
}

bool is_member(const coordinator_state& st, const std::string& worker) {
  return std::find(st.members.begin(), st.members.end(), worker) != st.members.end();
}

}  // namespace

std::uint64_t held_digest_of(const wire::message& state_request) {
  return state_request.envelope().getStateRequest().getHeldDigest();
}

held_requests::state_request_facts state_request_facts_of(const coordinator_state& st, const wire::message& request,
                                                          bool members_suffice) {
  const auto& worker = request.sender();
  const auto skips = request.envelope().getStateRequest().getSkipsRound();
  held_requests::state_request_facts f;
  f.loaded = st.loaded();
  f.members_suffice = members_suffice;
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

held_requests::contribution_facts contribution_facts_of(const coordinator_state& st, const wire::message& msg) {
  const auto c = msg.envelope().getContribution();
  held_requests::contribution_facts facts;
  facts.loaded = st.loaded();
  facts.seeded = st.rounds->current_phase() != round_tracker::phase::unseeded;
  facts.ready = st.rounds->current_phase() == round_tracker::phase::ready;
  facts.for_next_round = c.getRound() == st.rounds->open_round();
  facts.member = is_member(st, msg.sender());
  facts.sender_held = st.early.count(msg.sender()) > 0;
  facts.held = st.early.size();
  facts.collecting = st.rounds->current_phase() == round_tracker::phase::collecting;
  facts.for_round_after_open = facts.collecting && c.getRound() == st.rounds->open_round() + 1;
  facts.participant = is_participant(st, msg.sender());
  facts.participants = facts.collecting ? st.rounds->participants().size() : 0;
  facts.contributed = st.rounds->has_contributed(msg.sender());
  facts.for_round_before_open = facts.collecting && c.getRound() + 1 == st.rounds->open_round();
  facts.keep_late = st.cfg.keep_late_work;
  return facts;
}

}  // namespace atl::coordinator_detail
