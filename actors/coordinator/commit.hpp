#pragma once
// The commit of a round to its keepers (actors/coordinator/commit.cpp): the round's record
// (or, for the seed and for a keeper behind, the full state) as frames made once, sent to
// every keeper that has not acknowledged it, and the keepers' answers
// (actors/decisions/commit_barrier.hpp decides). The shell acts on what an answer means.
#include "actors/coordinator/base.hpp"

namespace atl::coordinator_detail {

// The committing round's frames (state::committing), made once per round.
coordinator_state::committing_frames& frames_to_commit(coordinator_state& st);
// theta_global of the committing round as a frame (fp32 results carry it), made once.
const wire::tensor& committing_theta(coordinator_state& st);
// A round entered phase committing: every keeper is sent it.
void start_commit(self_ptr self);
// The committing round to every keeper that has not acknowledged it yet.
void send_commit(self_ptr self);
// A keeper's CommitAck: early_results (every keeper has the whole request) and committed
// (every keeper acknowledged) are the shell's to act on; a keeper behind is sent the
// round's full state here.
commit_barrier::action on_commit_ack(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::coordinator_detail
