#pragma once
// Why a fragment's round waits: the answer of `atollctl explain` (and the dashboard), as a
// pure function of what the registry knows: the coordinator's last RoundProgress, where the
// coordinator runs, and each participant's node (state, last heartbeat) and step.
//
//   no coordinator placed ------------------------------> waits for: placement
//   no RoundProgress, or none for > stale_after ---------> waits for: the coordinator (its node's
//                                                          state and heartbeat; re-placed when
//                                                          its lease runs out)
//   unseeded -------------------------------------------> waits for: the first worker's parameters
//   ready ----------------------------------------------> waits for: members (a quorum to open)
//   collecting -----------------------------------------> waits for: the participants that have not
//                                                          contributed, each with node state,
//                                                          heartbeat and step; the rule that ends
//                                                          the wait (every participant, or the
//                                                          deadline and its majority, or a lease)
//   committing -----------------------------------------> waits for: the keepers not yet acknowledged
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace atl {

struct round_progress {
  std::uint64_t round = 0;
  std::string phase;  // unseeded | ready | collecting | committing
  // Collecting: at most progress_names of each; `participants` may name only those that have
  // not contributed. The counts are the round's, whatever the lists name.
  std::vector<std::string> participants, contributors, keepers, acked;
  std::size_t participant_count = 0, contributor_count = 0;
  double phase_for_s = 0;  // as the coordinator reported it
  double open_for_s = 0;
};

struct participant_facts {
  std::string worker;
  std::uint32_t node_id = 0;
  std::string node_state;  // as atollctl members shows it; "unknown" when not a member
  double last_heartbeat_s = -1;  // ago; < 0: never
  std::uint64_t step = 0;
  bool done = false;
};

struct explain_input {
  std::uint32_t fragment = 0;
  std::string coordinator_on;  // "node/N"; empty: not placed
  std::string coordinator_node_state;  // of that node
  double coordinator_heartbeat_s = -1;  // ago
  std::optional<round_progress> progress;
  double progress_age_s = 0;  // since the registry heard it
  std::vector<participant_facts> facts;  // of every participant of the open round
  double lease_s = 20;  // cluster.lease_ms
  double round_deadline_s = 0;  // diloco.round_deadline_ms; 0: none
  bool adaptive_close = false;  // diloco.round_close = adaptive
  std::size_t quorum = 1;  // the published quorum
  double stale_after_s = 3;  // a RoundProgress older than this: the coordinator is not reporting
};

struct explanation {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::string phase;  // the coordinator's, or "unplaced" / "silent"
  std::string waiting_for;  // placement | coordinator | seed | members | participants | keepers | nothing
  double since_s = 0;  // how long it has waited in this state
  std::vector<std::string> contributed;
  std::vector<participant_facts> missing;  // participants, or keepers (worker = keeper id)
  std::string rule;  // what ends the wait, and when
  std::string text;  // one paragraph for people
};

// Names a RoundProgress carries in each list: what `explain` shows, bounded whatever the round's size.
constexpr std::size_t progress_names = 256;

// The missing participants the text names (every one is in `missing`); "and N more" after.
constexpr std::size_t named_in_text = 10;

explanation explain_round(const explain_input& in);

}  // namespace atl
