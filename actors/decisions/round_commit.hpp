#pragma once
// The coordinator's committing round, apart from all I/O and clocks: the one place that says
// whether a round is committing, which one, which keepers have it, whether its result went
// out provisional, when it is committed and when to send it again. The coordinator's shell
// (actors/coordinator/coordinator.cpp) asks nothing else: round_tracker's phase `committing`
// is the seal on the round's values (no contribution is taken while it is set), not a
// protocol state.
//
//   idle --(1) start(round, bytes, now)--> committing: send the round to every keeper
//
//   committing, per keeper (K: the keepers of the current Membership):
//     (2) writing from k in K, first time    --> k has the whole request; if every keeper
//                                                 of K has it and early results are allowed
//                                                 (a DiLoCo round past the seed, not sent
//                                                 yet): send the result provisional
//     (3) behind from k in K, first time     --> send k the round's full state (it lacks
//                                                 the round before the record)
//     (4) acknowledged from k in K           --> every keeper of K acknowledged: committed
//     (5) refused, a second writing/behind/ack, an answer about another round, from a
//         keeper outside K, or any answer while idle --> nothing (a refusal is sent again
//                                                 when a retry is due)
//     (6) keepers(K')                        --> a keeper removed no longer holds the round
//                                                 up: committed, or the provisional result,
//                                                 as (4) and (2) say; one added is asked at
//                                                 the next retry
//     (7) tick(now), unacknowledged for commit_retry_after(base, tries, bytes)
//                                            --> send it again to every keeper that has not
//                                                 acknowledged it
//   committing --(8) settle()--> idle: the round is released (or was the seed); settle
//                                says whether its result went out provisional (the release
//                                then only confirms it)
//
// Effects, not calls: every edge returns what the shell must send.
#include <chrono>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace atl {

// How long after try number `tries` (1 = the first send) an unacknowledged commit of
// `bytes` is sent again: base, 2 base, 4 base ... at most 32 base, plus the time the bytes
// take at commit_floor_bytes_per_s. A commit is lost only with a connection (a head that
// restarts), so a resend must not land on keepers still receiving or writing the first copy:
// each one adds a whole copy's work (the averaging bench at 64 MiB sent every commit twice).
constexpr double commit_floor_bytes_per_s = 8e6;  // a 64 Mbit/s link
std::chrono::milliseconds commit_retry_after(std::chrono::milliseconds base, int tries, std::uint64_t bytes = 0);

class round_commit {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class answer { writing, acknowledged, behind, refused };
  enum class results { unsent, provisional };

  // What an edge asks the shell to do, in this order: send the round (its record, or the
  // full state to a keeper that needs_full_state) to `send_to`, then the provisional result,
  // then, once committed, release the round.
  struct effects {
    std::vector<std::string> send_to;
    bool send_provisional = false;
    bool committed = false;
    bool operator==(const effects& o) const {
      return send_to == o.send_to && send_provisional == o.send_provisional && committed == o.committed;
    }
  };

  explicit round_commit(std::vector<std::string> keepers = {}) : keepers_(std::move(keepers)) {}

  // (1). `early_results`: the round's result may go out provisional once every keeper has
  // the whole request (diloco.early_results, a DiLoCo round, not the seed).
  effects start(std::uint64_t round, std::uint64_t bytes, bool early_results, time_point now);
  effects on_answer(const std::string& keeper, std::uint64_t round, answer a);  // (2) to (5)
  effects set_keepers(std::vector<std::string> keepers);  // (6)
  effects tick(time_point now, std::chrono::milliseconds base);  // (7)
  results settle();  // (8)

  bool committing() const { return active_; }
  std::uint64_t round() const { return round_; }
  bool committed() const;  // every keeper of the set acknowledged
  bool every_keeper_has_it() const;  // every keeper is writing or acknowledged
  bool needs_full_state(const std::string& keeper) const { return behind_.count(keeper) > 0; }
  const std::vector<std::string>& keepers() const { return keepers_; }
  const std::set<std::string>& acknowledged() const { return acked_; }
  std::vector<std::string> unacknowledged() const;
  int tries() const { return tries_; }
  time_point last_sent() const { return sent_; }

 private:
  bool is_keeper(const std::string& keeper) const;
  // (2) and (4) as the set stands now: committed wins over a provisional result.
  effects settled_or_provisional();
  effects send_unacknowledged(time_point now);

  std::vector<std::string> keepers_;
  bool active_ = false;
  std::uint64_t round_ = 0;
  std::uint64_t bytes_ = 0;
  bool early_results_ = false;
  results results_ = results::unsent;
  std::set<std::string> acked_, writing_, behind_;
  int tries_ = 0;
  time_point sent_{};
};

}  // namespace atl
