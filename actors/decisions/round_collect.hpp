#pragma once
// The coordinator's round from its members to its close, apart from all I/O and clocks:
// how the coordinator starts, which members a round opens with, what becomes of each
// Contribution and StateRequest (taken, refused, answered or held until a round includes
// its sender), and when a round closes without everyone. The values are the round
// tracker's (round_tracker.hpp, which fences and averages them), the commit is
// round_commit's; actors/coordinator/coordinator.cpp is the shell: it decodes a message,
// asks this machine, and does what the effects say, in their order.
//
//   startup: asking_members --(1) first Membership--> loading (ask the keepers)
//            loading --(2) loaded(resumed)--> started (resumed: the first round announces
//                                                   the committed state to every member)
//
//   (1) membership(view)    the epoch, members and quorum; then (after the shell gave the
//                           commit its keepers) members_changed(now): a participant of the
//                           collecting round that is no longer a member is dropped (the
//                           round goes on without it and may complete), the round may
//                           close (adaptive), and (3)
//   (3) advance             started, the tracker ready, the members a quorum --> the next
//                           round opens with the members (`opened`); each held StateRequest
//                           is decided again (held_requests.hpp): answered, left out of
//                           the round and held, or held; after a resume every member not
//                           held gets the state; the held contributions are replayed (4)
//   (4) admit(contribution) held_requests.hpp's verdict: hold_early (held, one per
//                           sender), skip_open_round (held, its sender dropped from the
//                           open round: it may complete), or to be taken: the shell
//                           decodes it, then
//   (5) take(values, now)   the tracker fences and adds it: refused with its typed error
//                           (one refused as not_participant is left out of the round), or
//                           taken; the round's first arms its deadline; the last completes
//                           it; adaptive: it may close (7)
//       take late           diloco.late_work = keep: folded into the open round and the
//                           sender sent the result it missed (also for a resend of it)
//   (6) request(r)          answered in the round, outside it, or held (one per sender,
//                           the one with parameters kept); one that skips the open round
//                           leaves it (it may complete)
//   (7) deadline/grace      quorum.hpp decides: closed with a majority (complete), looked
//                           at again at the grace's end, or (deadline) a deadline later
//                           while that round is still open
//   (8) released            the round was committed and released: (3)
//
// `complete`: the open round has every contribution it will take (the tracker is
// committing); the shell commits it (DiLoCo) or releases the average (ddp), then (8).
// Nothing here opens a round while one is complete and not released.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/decisions/held_requests.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/decisions/round_tracker.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

class round_collect {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  // A message the shell keeps as it came (a held Contribution or StateRequest); opaque here.
  using held = std::shared_ptr<const void>;

  struct options {
    quorum::options quorum;
    bool keep_late_work = false;  // diloco.late_work = keep
  };
  enum class startup { asking_members, loading, started };

  struct membership_view {
    std::uint64_t epoch = 0;
    std::vector<std::string> workers;
    std::size_t quorum = 0;  // published with it (0: none)
  };
  struct contribution {
    std::string sender;
    std::uint64_t round = 0;
    held message;
  };
  // A contribution's values as the shell decoded them: int8 and fp4 stay `encoded`.
  struct contribution_values {
    std::uint64_t epoch = 0;
    float weight = 0;
    bool is_encoded = false;
    std::vector<float> decoded;
    encoded_values encoded;
  };
  struct state_request {
    std::string sender;
    std::uint64_t skips_round = 0;  // 0: none
    std::uint64_t held_digest = 0;  // of the fragment's bytes it holds (0: none)
    std::size_t tensors = 0;  // rank 0's first requests carry its parameters
    held message;
  };

  // What an edge asks the shell to do, in this order.
  struct effects {
    std::vector<std::string> notes;  // for the log (warnings)
    bool opened = false;  // a round opened: its inputs and bytes start from none
    std::vector<std::pair<std::string, std::uint64_t>> answer;  // the state, to (worker, held digest)
    std::optional<std::uint64_t> arm_deadline;  // round: deadline(round) a round_deadline from now
    std::optional<std::pair<std::uint64_t, time_point>> recheck;  // grace(round) at that time
    std::optional<error> refused;  // the contribution, with this error
    // The contribution is in the round under this name (its sender, or its late name): its
    // frames go to the keepers with the round's record.
    std::optional<std::string> taken_as;
    bool send_missed_result = false;  // late work: its sender gets the result it missed
    bool complete = false;  // commit or release the round
    std::vector<held> replay;  // contributions held for the round that opened, to admit again
  };

  round_collect(round_tracker& rounds, options opt) : rounds_(&rounds), opt_(std::move(opt)) {}

  // (1)
  void membership(membership_view view);
  effects members_changed(time_point now);
  // (2): `resumed` from a keeper's committed state: the first round announces it.
  void loaded(bool resumed);
  // (3) and (8)
  effects advance();
  // (4) and (5)
  struct admission {
    held_requests::contribution_verdict verdict;
    effects then;
  };
  admission admit(const contribution& c);
  effects take(const std::string& sender, std::uint64_t round, contribution_values values, bool late, time_point now);
  // (6): `then` says whether it is held; the shell then seeds from the held requests and
  // says it holds them (StateHeld) before acting on the rest.
  struct request_answer {
    bool held = false;
    effects then;
  };
  request_answer request(const state_request& r);
  // (7)
  effects deadline(std::uint64_t round, time_point now);
  effects grace(std::uint64_t round, time_point now);

  startup started_as() const { return startup_; }
  bool loaded() const { return startup_ == startup::started; }
  bool has_membership() const { return startup_ != startup::asking_members; }
  bool members_suffice() const;  // a round may open
  std::uint64_t epoch() const { return epoch_; }
  const std::vector<std::string>& members() const { return members_; }
  // StateRequests held until a round includes them, oldest first.
  const std::vector<state_request>& waiting() const { return waiting_; }
  bool holds_parameters() const;  // a held request carries parameters (rank 0's)
  // The open round's first and latest contribution, and every arrival from the first.
  time_point round_started() const { return round_started_; }
  time_point last_contribution() const { return last_contribution_; }

 private:
  quorum::view policy_view() const;
  bool is_member(const std::string& worker) const;
  held_requests::state_request_facts facts_of(const state_request& r) const;
  held_requests::contribution_facts facts_of(const contribution& c) const;
  // The open round without `worker` (it skips it); true: complete.
  bool leave_out(const std::string& worker, effects& fx);
  void open_next(effects& fx);  // (3), into the effects of the edge that asked
  void close_or_wait(std::uint64_t round, time_point now, effects& fx);
  void take_on_time(const std::string& sender, std::uint64_t round, contribution_values values, time_point now,
                    effects& fx);
  void take_late(const std::string& sender, std::uint64_t round, contribution_values values, effects& fx);

  round_tracker* rounds_;
  options opt_;
  startup startup_ = startup::asking_members;
  bool announce_on_open_ = false;
  std::uint64_t epoch_ = 0;
  std::vector<std::string> members_;
  std::size_t quorum_ = 0;  // from the registry (0: run.min_workers)
  std::vector<state_request> waiting_;
  // Members left out of the open round at their word (a contribution refused as
  // not_participant, or a StateRequest that skips it): held until a round includes them.
  std::set<std::string> left_out_;
  std::map<std::string, held> early_;  // contributions for a round not open yet, by sender
  time_point round_started_{};
  time_point last_contribution_{};
  std::vector<std::chrono::steady_clock::duration> arrivals_;
};

const char* to_string(round_collect::startup s);

}  // namespace atl
