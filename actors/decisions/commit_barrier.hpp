#pragma once
// The commit of one round to its keepers, apart from all I/O and clocks: which keepers
// still owe an acknowledgement, which need the full state, when the round's early results
// may go, when it is committed, and when to send it again.
//
//   idle --start(round, bytes, now)--> committing (every keeper asked)
//
//   per keeper:  asked --writing--> writing --acknowledged--> acknowledged
//                asked | writing --behind (first time)--> behind: send it the full state
//                behind --acknowledged--> acknowledged
//                any --refused--> unchanged (sent again when a retry is due)
//   committing --every keeper of the current set acknowledged--> committed
//   set_keepers(new set): a keeper removed no longer holds the round up (it may complete
//                it); one added is asked at the next retry
//   retry due: the last send is older than commit_retry_after(base, tries, bytes)
//
// Early results may go once every keeper has the whole request (writing, behind being sent
// the state does not count, or acknowledged). Answers about another round, from a keeper
// outside the set, or a second `behind`, change nothing.
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

class commit_barrier {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  enum class answer { writing, acknowledged, behind, refused };
  enum class action {
    none,
    send_full_state,  // to the keeper that answered: it cannot follow the round's record
    early_results,  // every keeper has the whole request now
    committed,  // every keeper acknowledged the round
  };

  explicit commit_barrier(std::vector<std::string> keepers = {}) : keepers_(std::move(keepers)) {}

  // A round starts committing; the caller sends it to every keeper (then sent()).
  void start(std::uint64_t round, std::uint64_t bytes);
  void finish() { active_ = false; }  // the round is released (or was the seed)
  void set_keepers(std::vector<std::string> keepers);
  action on_answer(const std::string& keeper, std::uint64_t round, answer a);
  void sent(time_point now);  // the round went to every unacknowledged keeper

  bool active() const { return active_; }
  std::uint64_t round() const { return round_; }
  bool committed() const;  // every keeper of the set acknowledged
  bool every_keeper_has_it() const;  // every keeper is writing or acknowledged
  bool retry_due(time_point now, std::chrono::milliseconds base) const;
  bool needs_full_state(const std::string& keeper) const { return behind_.count(keeper) > 0; }
  const std::vector<std::string>& keepers() const { return keepers_; }
  const std::set<std::string>& acknowledged() const { return acked_; }
  std::vector<std::string> unacknowledged() const;
  int tries() const { return tries_; }
  time_point last_sent() const { return sent_; }

 private:
  bool is_keeper(const std::string& keeper) const;

  std::vector<std::string> keepers_;
  bool active_ = false;
  std::uint64_t round_ = 0;
  std::uint64_t bytes_ = 0;
  std::set<std::string> acked_, writing_, behind_;
  int tries_ = 0;
  time_point sent_{};
};

const char* to_string(commit_barrier::action a);

}  // namespace atl
