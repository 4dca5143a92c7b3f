#pragma once
// What the coordinator's files share (actors/coordinator/coordinator.cpp: rounds, members, state
// requests, the actor; closing.cpp: rounds closed without every participant;
// coordinator_startup.cpp: members and committed state at start;
// coordinator_commit.cpp: the commit of a round to its keepers; coordinator_results.cpp:
// results, reports and progress). Internal to the coordinator.
#include <optional>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/shared/pseudo_gradient.hpp"

namespace atl::coordinator_detail {

using self_ptr = caf::stateful_actor<coordinator_state>*;

std::string fragment_name(const coordinator_state& st);

// coordinator.cpp
void advance(self_ptr self);  // opens the next round when it can
void finish_commit_if_acked(self_ptr self);  // releases the committing round once committed
void seed_from_waiting(self_ptr self);  // an unseeded run: round 0 from held parameters

void on_round_complete(self_ptr self);  // commits the round the tracker completed

// closing.cpp: the quorum policy's facts, and rounds closed without every participant
bool membership_ready(const coordinator_state& st);  // a Membership of a quorum
// Closes open round `round` if the policy says so (true); within an adaptive grace, asks
// again when it ends.
bool close_or_wait(self_ptr self, std::uint64_t round);
void on_deadline(self_ptr self, std::uint64_t round);  // round_deadline after its first contribution
// A participant sent the round after the open one: the round goes on without it, its
// contribution held for the next.
void skip_open_round(self_ptr self, const wire::message_ptr& msg);
// A participant said in a StateRequest that it starts past the open round: the round goes
// on without it (true: that completed it) and its requests wait for a round with it.
bool leave_out(self_ptr self, const wire::message& request);
// Late work for the round before the open one (decoded into `values`, or kept `encoded`):
// folded into the open round, and the sender gets the result it missed.
void take_late_work(self_ptr self, const wire::message_ptr& msg, std::vector<float> values, encoded_values encoded);
std::uint64_t refusal_epoch(const coordinator_state& st);

// coordinator_startup.cpp
void request_membership(self_ptr self);
void request_startup_state(self_ptr self);  // the members, then the committed state
void resume_when_every_keeper_answered(self_ptr self);
void on_load_reply(self_ptr self, const wire::message_ptr& msg);

// coordinator_commit.cpp
coordinator_state::committing_frames& frames_to_commit(coordinator_state& st);
const wire::tensor& committing_theta(coordinator_state& st);
void start_commit(self_ptr self);
void send_commit(self_ptr self);
void on_commit_ack(self_ptr self, const wire::message_ptr& msg);

// coordinator_results.cpp
// The committed state of the fragment to `worker`: inline, or a header naming the keepers
// to fetch it from (a large fragment, or one whose bytes the worker holds: `held_digest`).
void send_state(self_ptr self, const std::string& worker, std::uint64_t held_digest);
std::optional<round_update_frames> released_update_frames(const coordinator_state& st);
void send_provisional_results_once_received(self_ptr self);
void release(self_ptr self, const std::vector<std::string>& contributors);
void report_progress(self_ptr self);
// The last committed round's result, whole (fp32 theta_global), to a worker whose late
// contribution to it was folded into the open round.
void send_missed_result(self_ptr self, const std::string& worker);
// Round reports wait for the registry's RoundReportAck, and go one at a time, oldest first
// (coordinator_state::unacked_reports). The oldest again: the node's link to the head came
// back; or, when reports carry data, it is unacknowledged for report_resend_after (checked
// each tick).
void resend_round_report(self_ptr self);
void resend_round_report_if_due(self_ptr self);
void on_round_report_ack(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::coordinator_detail
