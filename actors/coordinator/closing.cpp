// When an open round closes without every participant (actors/decisions/quorum.hpp asked
// with this coordinator's facts): at its deadline (diloco.round_deadline_ms) or once its
// adaptive grace passed (diloco.round_close = adaptive), given a quorum and a majority.
#include <algorithm>

#include <caf/all.hpp>

#include "actors/coordinator/internal.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/process/log.hpp"

namespace atl::coordinator_detail {

// What the quorum policy (actors/decisions/quorum.hpp) is asked about this fragment.
quorum::view policy_view(const coordinator_state& st) {
  quorum::view v;
  v.has_membership = st.has_membership;
  v.members = st.members.size();
  v.published = st.quorum;
  v.round_open = st.rounds->current_phase() == round_tracker::phase::collecting;
  if (v.round_open) {
    v.participants = st.rounds->participants().size();
    v.contributed = st.rounds->contributors().size();
    if (v.contributed > 0) {
      v.first_contribution = st.round_started;
      v.arrivals = st.arrivals;
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

bool membership_ready(const coordinator_state& st) {
  return quorum::members_suffice(policy_view(st), policy_options(st));
}

// Asks the quorum policy about open round `round`: closes it (true), or, within an
// adaptive grace, looks again when the grace ends (a contribution meanwhile asks again).
bool close_or_wait(self_ptr self, std::uint64_t round) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::collecting || st.rounds->open_round() != round) return false;
  const auto participants = st.rounds->participants().size();
  const auto contributed = st.rounds->contributors().size();
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
  on_round_complete(self);
  return true;
}

// Round `round` is round_deadline old. The quorum policy closes it with the contributions
// it has if they are a quorum and a majority of its participants (no split brain);
// otherwise the deadline is looked at again later.
void on_deadline(self_ptr self, std::uint64_t round) {
  if (close_or_wait(self, round)) return;
  self->delayed_send(self, self->state.cfg.round_deadline, deadline_atom::value, round);
}

}  // namespace atl::coordinator_detail
