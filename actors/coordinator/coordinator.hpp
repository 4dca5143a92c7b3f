#pragma once
// Fragment coordinator actor ("coord/P"): runs the outer rounds of one fragment.
//
// Placed by the registry on a node (PlaceCoordinator), or anywhere a test spawns it.
//   start: LoadRequest -> keeper, MembershipRequest -> registry (repeated until answered)
//   LoadReply(found)     -> restore(round)                      -> open next round, and
//                           send FragmentState to every member (a re-placed coordinator:
//                           workers waiting on the old one resync at once)
//   LoadReply(none)      -> wait for the first StateRequest      -> seed + commit round 0
//   StateRequest         -> FragmentState(committed round, theta_global) if the sender is a
//                           participant of the open round that has not contributed; else
//                           held until a round opens with it (the run needs a quorum:
//                           min_workers; fewer in the run's tail), and answered StateHeld
//                           (seedHeld: seeded, or parameters to seed from are held);
//                           a member outside the open round gets FragmentState until it
//                           was left out of it (it may have another fragment's round to
//                           reach); a participant whose request names the open round as
//                           skipped (it starts past it) is left out of it and held
//   Contribution early   -> (for the round about to open, from a member) held until it opens
//   Contribution         -> decoded to fp32 (any codec) -> round_tracker.add (typed Refusal on
//                           any fence)
//   Contribution late    -> (for the round before the open one, which closed without its
//                           sender; diloco.late_work = keep) folded into the open round,
//                           and the sender gets the result it missed (no resync)
//   round complete       -> CommitRequest(the round's record: its inputs as received, or
//                           its fp32 average when smaller, and the digest of theta_global;
//                           round 0: theta and momentum) -> every keeper of the Membership
//                           (the head's, and a replica on a node) -> CommitAck(ok) from all
//                           of them -> open next round -> RoundResult to every contributor
//   CommitAck(writing)   -> a keeper has the whole request; once every keeper has it and
//                           early_results: RoundResult(provisional) to every contributor,
//                           and after the acks only a RoundResult (confirms, no tensors):
//                           contributors apply what they hold then
//   CommitAck(behind)    -> that keeper lacks the round before the record: it gets the
//                           round's full state (theta, momentum, residual) at once
//   CommitAck(not ok), or none within commit_retry -> sent again until acknowledged,
//                           waiting twice as long after each unanswered try, plus the
//                           time its bytes take on a slow link (a resend only adds to the
//                           keepers' work: commit_retry_after); nothing is released before
//   Membership           -> participants that left are dropped from the open round
//   deadline (round_deadline after the first contribution), or the adaptive grace's end
//                        -> the round closes with the contributions it has, if they are a
//                           quorum and a majority of its participants (actors/decisions/
//                           quorum.hpp); a latecomer's work is taken late (below), or,
//                           with diloco.late_work = drop, refused wrong_round (it resyncs)
//   confirm (node agent) -> MembershipRequest: a restarted registry placed us again
//   after each release   -> RoundReport -> registry (workers send their RoundAck there too),
//                           with the data pieces of the contributions it took; sent again
//                           until a RoundReportAck covers it
// Every participant receives the same bytes of theta_global, which makes S1 hold by
// construction; the keepers commit those bytes before anyone applies them (S2, S4).
//
// Two pure machines decide; the shell decodes each message, asks the one it concerns and
// does what the effects say, in their order (act_on):
//   actors/decisions/round_collect.hpp  the round from its members to its close: the
//                           start, held requests and contributions, rounds opened, taken
//                           contributions, closes without every participant
//   actors/decisions/round_commit.hpp   the committing round: the round to keepers, the
//                           provisional result, the release
// Its files are layered, top down; each calls only the layers below it, never a file
// beside it (tools/check/layering.sh holds every include to this drawing):
//   coordinator.cpp         the shell: each message to its machine, and their effects run
//   startup.cpp             the requests a start needs (members, then the committed state)
//   results.cpp             results, committed state, reports and progress sent
//   commit.cpp              a round's commit to its keepers, and their answers
//   base.hpp, state.hpp     the actor pointer and log name; configuration and state
#include <string>

#include <caf/stateful_actor.hpp>

#include "actors/coordinator/state.hpp"
#include "runtime/process/config.hpp"
#include "runtime/transport/transport.hpp"

namespace atl {

caf::behavior coordinator_actor(caf::stateful_actor<coordinator_state>* self, transport* net, std::string cluster_id,
                                coordinator_config cfg);

}  // namespace atl
