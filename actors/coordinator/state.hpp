#pragma once
// The coordinator's configuration and state (actors/coordinator/coordinator.hpp): its own
// header, so that the coordinator's files read them without including the actor.
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_clock.hpp>

#include "actors/decisions/data_cursor.hpp"
#include "actors/decisions/round_collect.hpp"
#include "actors/decisions/round_commit.hpp"
#include "actors/decisions/round_tracker.hpp"
#include "actors/shared/membership_delta.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/config.hpp"
#include "runtime/transport/transport.hpp"
#include "runtime/transport/wire.hpp"
#include "storage/round_record.hpp"

namespace atl {

struct coordinator_config {
  std::uint32_t fragment = 0;
  std::string keeper = keeper_id(head_keeper_number);
  std::string registry = registry_id();
  std::size_t min_workers = 1;
  outer_options outer;
  // ddp mode: rounds release the average and are not committed (one round per step).
  bool average_only = false;
  std::chrono::milliseconds commit_retry{1000};
  // 0: a round waits for every participant. Otherwise a round this old (from its first
  // contribution) closes with what it has, given a quorum and a majority of participants.
  std::chrono::milliseconds round_deadline{0};
  // diloco.round_close = adaptive: a majority's round closes once its grace passed
  // (actors/decisions/quorum.hpp, grace_window).
  bool adaptive_close = false;
  double grace_k = 3;
  std::chrono::milliseconds grace_min{200}, grace_max{60000};
  // diloco.late_work = keep: a participant's contribution to the round before the open
  // one, which closed without it, is folded into the open one (round_tracker::add_late).
  // Off here, so that a caller that does not ask keeps the refusal (wrong_round).
  bool keep_late_work = false;
  // A larger fragment's state goes to a resyncing worker as a header: it fetches the
  // values in chunks from the keepers (diloco.state_chunk_values).
  std::size_t state_chunk_values = 1 << 20;
  // Results go out encoded with the run's codec (diloco.codec, diloco.codec_chunk) as the
  // round's change of theta_global; fp32 sends theta_global itself (and ddp always does).
  codec_kind result_codec = codec_kind::fp32;
  std::size_t result_chunk = 256;
  // diloco.round_record = result: the outer state follows the published change, which is
  // the round's record (outer_round.hpp). Off here: a caller that does not ask logs inputs.
  bool state_follows_result = false;
  // storage.keepers = nodes: the head's keeper may be behind (it leaves the commits while
  // two replicas run), so a new coordinator asks every keeper of its Membership and resumes
  // from the newest round. Otherwise keeper/0 holds every committed round.
  bool load_from_every_keeper = false;
  // diloco.early_results: a DiLoCo round's result goes out provisional while its keepers
  // write it (once each has the whole request) and is confirmed once every keeper has it.
  // Off here, so that a caller that does not ask gets the result after the commit, whole.
  bool early_results = false;
  // run.data_cursor: reports carry the data their rounds took, so the registry must apply
  // every one, in order (one on its way at a time); without it only the latest is kept.
  bool reports_carry_data = false;
  // RoundProgress goes to the registry at a tick when it changed, and otherwise this often:
  // under the 3 s after which `atollctl explain` says a coordinator is not reporting
  // (actors/decisions/round_explain.hpp), and a tick's message apart from that. With S slices
  // per fragment the head hears P x S coordinators, most of them unchanged most ticks.
  std::chrono::milliseconds progress_keepalive{2000};
};

// The coordinator of `fragment` for a run configured by `run`.
coordinator_config coordinator_config_for(const run_config& run, std::uint32_t fragment);

struct coordinator_state {
  std::unique_ptr<mailer> mail;
  std::unique_ptr<round_tracker> rounds;
  coordinator_config cfg;
  // The round from its members to its close (actors/decisions/round_collect.hpp): the
  // startup phase, the members, held requests and contributions, and the open round's times.
  std::unique_ptr<round_collect> collect;
  bool loaded() const { return collect->loaded(); }
  bool has_membership() const { return collect->has_membership(); }
  std::uint64_t epoch() const { return collect->epoch(); }  // of the current membership
  std::map<std::string, wire::message_ptr> load_replies;  // so far, by keeper (load_from_every_keeper)
  // The Membership as the registry's deltas built it (round_collect has its view), and
  // when the whole one was last asked for after a gap.
  held_membership membership;
  std::optional<std::chrono::steady_clock::time_point> membership_asked;
  // The open round's accepted contributions as received: the round log's record forwards
  // their frames to the keepers.
  std::map<std::string, wire::message_ptr> round_inputs;
  std::vector<std::pair<std::string, float>> released_inputs;  // the releasing round's (round_tracker::inputs)
  // Committed rounds for the registry not acknowledged yet (RoundReportAck), oldest first;
  // only the oldest is on its way, sent again after the node's link to the head comes back
  // or once unacknowledged for report_resend_after (a head that took over, or restarted,
  // may never have heard it, and its ties commit the run's data).
  struct round_report {
    std::uint64_t round = 0, epoch = 0, digest = 0, bytes = 0;
    std::vector<std::string> participants;
    std::vector<float> weights;  // each participant's, in the same order
    std::vector<std::string> late;  // late inputs folded in (round_tracker::add_late), by worker
    std::vector<float> late_weights;  // as averaged: late_discount times the sender's
    float duration_s = 0, since_last_contribution_s = 0;
    struct tie {
      std::string worker;
      std::uint64_t round = 0;  // contributed to: this round, or the one before (late)
      std::vector<data::piece> pieces;
    };
    std::vector<tie> ties;  // run.data_cursor: the data the taken contributions trained on
  };
  std::deque<round_report> unacked_reports;
  std::chrono::steady_clock::time_point reports_sent;  // when the oldest last went
  // The committing round: its keepers (every one must acknowledge it; from the
  // Membership), their answers, its retries and whether its result went out provisional
  // (actors/decisions/round_commit.hpp: the one place that says a round is committing).
  round_commit commit;
  // What the committing round sends, made once: its record and the record's frames (the
  // seed: theta and momentum), shared by every keeper's CommitRequest and its resends; the
  // digest of theta_global; and theta as a frame, made only when a result carries it (fp32).
  // A cache of commit.round()'s bytes, dropped when the round is settled.
  struct committing_frames {
    std::uint64_t round = 0;
    std::uint64_t theta_digest = 0;
    std::optional<round_record> record;  // empty: the full state (the seed, a result that is theta)
    std::optional<round_update_frames> update;  // the round's published change, shared with its results
    std::vector<wire::tensor> tensors;
    std::uint64_t bytes = 0;  // of the tensors
    std::optional<wire::tensor> theta;
    std::vector<wire::tensor> full_state;  // theta, momentum, residual: for keepers behind
  };
  std::optional<committing_frames> commit_frames;
  const caf::actor_clock* clock = nullptr;  // steady, or simulated in the protocol fault tests
  std::chrono::steady_clock::time_point now() const { return clock->now(); }
  std::uint64_t round_bytes = 0;
  std::string progress_key;  // phase, round and contributor count of the last RoundProgress
  std::chrono::steady_clock::time_point progress_since;  // when progress_key last changed
  std::string progress_sent_key;  // what the registry last heard, and when
  std::chrono::steady_clock::time_point progress_sent;
  static inline const char* name = "coordinator";
};

// With reports that carry data (coordinator_config::reports_carry_data), how long the
// oldest waits for its RoundReportAck before it is sent again.
constexpr std::chrono::seconds report_resend_after{2};

}  // namespace atl
