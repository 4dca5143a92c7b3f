#pragma once
// What a coordinator does with a StateRequest or a Contribution that its open round cannot
// take now: answer it, take it, or hold it until a round opens that includes its sender.
// Pure decisions over facts the coordinator gathers (no I/O, no clock), each with its
// reason, so that the table tests name why.
//
//   StateRequest:
//     skip_and_hold         loaded, a round is collecting, the sender is a participant that
//                           has not contributed and says it skips that round (it starts past
//                           its sync point: a joiner whose other slice of the fragment was a
//                           round ahead), and others take part: the round goes on without it
//                           and the request is held until a round that includes it opens
//                           (answered now with the round before, it would still never send
//                           this one, which would wait for it). The round's only participant
//                           is answered in it instead: a round of nobody could never close.
//     hold (wants newer)    it says it skips a round not committed yet (the open one, or a
//                           later one): the committed state is older than the one it needs
//     answer_in_round       loaded, the members suffice, a round is collecting, the sender
//                           is a participant that has not contributed
//     answer_outside_round  DiLoCo, loaded, a round is collecting, the sender is a member
//                           outside it that was not left out of it: it may be a
//                           participant of another fragment's round and must train to reach
//                           it (held here, it would wait on this round, which (streaming)
//                           waits on that round's result, which waits on it)
//     hold                  anything else: answered when a round opens that includes it
//   Contribution:
//     hold_early            for the round about to open (ready, the next round, from a
//                           member), or anything before the state is loaded or seeded; at
//                           most max_early senders (a sender already held replaces its own)
//     skip_open_round       for the round after the collecting one, from a participant of
//                           the collecting round that has not contributed to it: it started
//                           past that round (a warm joiner whose other slices of the fragment
//                           were a round ahead) and will never send it. The round goes on
//                           without it; its contribution is held for the next round (unless
//                           it is the round's only participant: that round would be abandoned
//                           and reopened as the same round, so the tracker refuses it instead)
//     take_late             for the round before the collecting one, from a participant of
//                           the collecting round, with diloco.late_work = keep: late work,
//                           which the tracker folds into the open round if its sender was
//                           left out of the round it names (round_tracker::add_late fences)
//     take                  everything else: the round tracker fences it (typed refusals)
#include <cstddef>

namespace atl::held_requests {

struct state_request_facts {
  bool loaded = false;  // the keeper answered the LoadRequest
  bool members_suffice = false;  // quorum::members_suffice
  bool collecting = false;  // a round is open
  bool nesterov = true;  // DiLoCo (not ddp)
  bool participant = false;  // of the open round
  bool contributed = false;  // to the open round
  bool member = false;  // of the current epoch
  // Left out of the open round at its word: its contribution to it was refused as
  // not_participant, or it said it skips it.
  bool left_out = false;
  bool skips_open_round = false;  // its sender skips the open round (names it or a later one)
  bool wants_newer_state = false;  // it names a round not committed yet as one it skips
  std::size_t participants = 0;  // of the open round
};

enum class state_verdict { skip_and_hold, answer_in_round, answer_outside_round, hold };
state_verdict decide(const state_request_facts& f);

// Contributions held before their round opens: one per sender, at most this many senders.
constexpr std::size_t max_early = 4096;

struct contribution_facts {
  bool loaded = false;
  bool seeded = false;  // the round tracker is past unseeded
  bool ready = false;  // between rounds
  bool for_next_round = false;  // it names the round about to open
  bool collecting = false;  // a round is open
  bool for_round_after_open = false;  // it names the round after the collecting one
  bool for_round_before_open = false;  // it names the round before the collecting one
  bool keep_late = false;  // diloco.late_work = keep
  bool participant = false;  // of the collecting round
  bool contributed = false;  // to the collecting round
  std::size_t participants = 0;  // of the collecting round
  bool member = false;
  bool sender_held = false;  // a contribution of this sender is held already
  std::size_t held = 0;  // senders held
};

enum class contribution_verdict { hold_early, skip_open_round, take_late, take };
contribution_verdict decide(const contribution_facts& f);

const char* to_string(state_verdict v);
const char* to_string(contribution_verdict v);

}  // namespace atl::held_requests
