#pragma once
// The commit of a round to its keepers (actors/coordinator/commit.cpp): the round's record
// (or, for the seed and for a keeper behind, the full state) as frames made once, sent to
// the keepers the committing round's machine names, and the keepers' answers given to it
// (actors/decisions/round_commit.hpp decides). The shell acts on the effects it returns.
#include "actors/coordinator/base.hpp"

namespace atl::coordinator_detail {

// The committing round's frames (state::commit_frames), made once per round.
coordinator_state::committing_frames& frames_to_commit(coordinator_state& st);
// theta_global of the committing round as a frame (fp32 results carry it), made once.
const wire::tensor& committing_theta(coordinator_state& st);
// A round entered round_tracker's phase committing: the machine starts its commit.
round_commit::effects start_commit(coordinator_state& st);
// The committing round to each of `keepers`: its record, or the full state to one that
// needs it.
void send_commit(coordinator_state& st, const std::vector<std::string>& keepers);
// A keeper's CommitAck, given to the machine (and logged).
round_commit::effects on_commit_ack(coordinator_state& st, const wire::message& msg);

}  // namespace atl::coordinator_detail
