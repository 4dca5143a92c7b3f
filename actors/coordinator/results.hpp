#pragma once
// What a round releases (actors/coordinator/results.cpp): results to its contributors,
// committed state to workers that ask, reports to the registry, and progress.
#include <optional>
#include <string>
#include <vector>

#include "actors/coordinator/base.hpp"
#include "actors/shared/pseudo_gradient.hpp"

namespace atl::coordinator_detail {

// The committed state of the fragment to `worker`: inline, or a header naming the keepers
// to fetch it from (a large fragment, or one whose bytes the worker holds: `held_digest`).
void send_state(self_ptr self, const std::string& worker, std::uint64_t held_digest);
// diloco.early_results: the committing round's result, provisional (when its machine says:
// every keeper has the whole request).
void send_provisional_results(self_ptr self);
// A round released in two steps around the opening of the next (results carry the open
// round's epoch): first reported to the registry, which hears of a round before any
// worker can; then the results sent.
struct released_round {
  std::vector<std::string> contributors;
  std::uint64_t round = 0, digest = 0;
  std::optional<wire::tensor> theta;  // what a result carries without an update
  std::optional<round_update_frames> update;
  bool confirm = false;  // its result went out provisional: a confirmation follows
};
// `provisional`: the round's result went out provisional (round_commit::settle).
released_round report_release(self_ptr self, const std::vector<std::string>& contributors, bool provisional);
void send_released(self_ptr self, const released_round& r);
// Each tick: the round's phase, participants and keepers to the registry, when they changed
// or coordinator_config::progress_keepalive passed since it last heard.
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
