#pragma once
// What a keeper decides, apart from its store, its messages and its clock
// (actors/keeper/keeper.hpp is the shell): the writer-epoch fence, the catch-up of a
// replica, the records waiting to be followed, and the one snapshot being written.
//
//   catch-up (a replica; fragments F: its keeper group's units, source S):
//     catching_up(missing = F) --(1) LoadReply(p) from S, p missing--> missing - {p}:
//                                     store it if newer than the store's round of p
//     catching_up --(2) LoadReply from another sender--> refused (unexpected_message)
//     catching_up --(3) LoadReply(p), p not missing--> ignored (a duplicate answer)
//     catching_up --(4) a commit of p acknowledged here--> missing - {p} (committed here is
//                                     the newest: the source is not asked again)
//     missing empty --> caught up: KeeperReady may be reported (5)
//
//   fence, per fragment (writer epoch W, from the coordinators and the store):
//     (6) LoadRequest from a coordinator of epoch e    --> W = max(W, e)
//     (7) commit (round r, epoch e, theta digest d), the store's newest round R of the
//         fragment with its epoch and digest (one read) --> W = max(W, epoch of R); then
//           e >= W                                   --> write it
//           e < W, r == R and d is R's digest          --> write it (a retry of the same bytes)
//           else                                     --> refused (stale_epoch)
//     (8) a commit acknowledged                      --> W = max(W, e), and (4)
//
//   follow queue (records acknowledged, not applied yet):
//     (9)  a record acknowledged, not followed already (the copy is at its round, from an
//          epoch as new) nor waiting --> queued; the first in an empty queue asks for the
//          follow timer
//     (10) the timer, or anything else that reads the followed copy --> every queued record
//          is taken, in order (after the timer, the next record asks for a new one)
//
//   snapshot (one at a time):
//     (11) due (every snapshot_every rounds) while none is written --> started(now)
//          due while one is written                                 --> skipped
//     (12) the writer says it is done --> the snapshot's seconds; none written now
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

// What the fence looks at in a commit: a snapshot's or a round record's.
struct commit_identity {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::uint64_t theta_digest = 0;
  bool operator==(const commit_identity& o) const {
    return fragment == o.fragment && round == o.round && epoch == o.epoch && theta_digest == o.theta_digest;
  }
};

// The store's newest round of a fragment (none: nothing stored), read once per commit.
struct stored_round {
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::uint64_t digest = 0;  // of theta
};

class keeper_machine {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  // The head's keeper: nothing to catch up.
  keeper_machine() = default;
  // A replica of a run with `fragments` sync units catching up from `source` the units its
  // keeper group keeps (`kept`, each below `fragments`; empty: every unit).
  keeper_machine(std::string source, std::uint32_t fragments, const std::vector<std::uint32_t>& kept = {});

  // Catch-up.
  enum class catch_up { store_if_newer, refuse, ignore };
  catch_up on_load_reply(const std::string& sender, std::uint32_t fragment);  // (1) (2) (3)
  const std::set<std::uint32_t>& missing() const { return missing_; }
  bool caught_up() const { return missing_.empty(); }
  bool can_report_ready() const { return missing_.empty() && fragments_ > 0; }  // (5)
  const std::string& source() const { return source_; }
  bool is_replica() const { return !source_.empty(); }
  std::uint32_t fragments() const { return fragments_; }

  // Fence.
  void coordinator_loading(std::uint32_t fragment, std::uint64_t epoch);  // (6)
  // (7): `stored` is the store's newest round of the fragment, nullopt when it holds none.
  status fence(const commit_identity& commit, const std::optional<stored_round>& stored);
  void committed(std::uint32_t fragment, std::uint64_t epoch);  // (8)
  std::uint64_t writer_epoch(std::uint32_t fragment) const;

  // Follow queue. `followed`: the round and epoch the keeper's copy of the fragment is at.
  struct followed_at {
    std::uint64_t round = 0, epoch = 0;
  };
  // (9): true if queued; `schedule` is set when the follow timer must be started.
  bool acknowledged(const commit_identity& record, const std::optional<followed_at>& followed, bool& schedule);
  // (10): how many queued records to follow now, oldest first (the shell pops as many);
  // `timer`: the follow timer fired.
  std::size_t take_pending(bool timer);
  std::size_t pending() const { return queued_.size(); }

  // Snapshots.
  bool start_snapshot(time_point now);  // (11): false when one is being written (skipped)
  double finish_snapshot(time_point now);  // (12): seconds it took
  bool snapshot_writing() const { return snapshot_started_.has_value(); }

 private:
  void raise(std::uint32_t fragment, std::uint64_t epoch);

  std::string source_;
  std::uint32_t fragments_ = 0;
  std::set<std::uint32_t> missing_;
  std::map<std::uint32_t, std::uint64_t> writer_epoch_;
  std::vector<commit_identity> queued_;
  bool follow_scheduled_ = false;
  std::optional<time_point> snapshot_started_;
};

}  // namespace atl
