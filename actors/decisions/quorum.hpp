#pragma once
// The one quorum policy of the outer rounds: how many workers a round needs, when a
// coordinator may open one, and when a round past its deadline may close without the
// participants it still waits for. The registry publishes `required_participants` with each
// Membership; every coordinator asks `decide`.
//
//   no Membership yet ------------------------------------------> wait  (no_membership)
//   no round open, members < needed (or none) ------------------> wait  (too_few_members)
//   no round open, members >= needed ---------------------------> open  (enough_members)
//   round open, no contribution yet, or before its deadline ----> collect (collecting)
//   round open, deadline passed, contributed >= max(needed, participants / 2 + 1)
//                                                   ------------> close (deadline_with_majority)
//   round open, deadline passed, fewer contributions ------------> collect (deadline_without_majority):
//                                                                 looked at again a deadline later
//
// needed = the published quorum, or run.min_workers before one is published. A round
// closed at its deadline has a majority of its participants, so no two disjoint groups can
// each close a round (no split brain). A round every participant contributed to closes at
// once in the round_tracker; that needs no policy.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace atl::quorum {

using time_point = std::chrono::steady_clock::time_point;

struct options {
  std::size_t min_workers = 1;  // run.min_workers
  std::chrono::milliseconds round_deadline{0};  // 0: no fixed deadline
  bool adaptive = false;  // diloco.round_close = adaptive: the grace window below
  double grace_k = 3;  // diloco.grace_k: spreads (MADs) past the median arrival
  std::chrono::milliseconds grace_min{200};  // diloco.grace_min_ms
  std::chrono::milliseconds grace_max{60000};  // diloco.grace_max_ms
};

// What a coordinator knows when it asks.
struct view {
  bool has_membership = false;  // the registry answered at least once
  std::size_t members = 0;  // workers of the current epoch
  std::size_t published = 0;  // the quorum in the last Membership (0: none yet)
  bool round_open = false;  // collecting contributions
  std::size_t participants = 0;  // of the open round
  std::size_t contributed = 0;  // of the open round
  std::optional<time_point> first_contribution;  // of the open round
  // When each accepted contribution of the open round arrived, after the first (offsets
  // from it, the first's included as zero); read by the adaptive grace only.
  std::vector<std::chrono::steady_clock::duration> arrivals;
};

enum class decision { wait, open, collect, close };
enum class reason {
  no_membership,
  too_few_members,
  enough_members,
  collecting,
  deadline_with_majority,
  deadline_without_majority,
  in_grace,
  grace_with_majority,
};

struct verdict {
  verdict() = default;
  verdict(decision w, reason y, std::size_t n, std::optional<time_point> recheck = std::nullopt)
      : what(w), why(y), needed(n), recheck_at(recheck) {}
  decision what = decision::wait;
  reason why = reason::no_membership;
  std::size_t needed = 0;  // contributions a round must have to close at its deadline
  // in_grace: when the grace ends and the round may close (asked again then, or on the
  // next contribution, which may move it).
  std::optional<time_point> recheck_at;
  bool operator==(const verdict& o) const {
    return what == o.what && why == o.why && needed == o.needed && recheck_at == o.recheck_at;
  }
};

verdict decide(const view& v, const options& opt, time_point now);

// The adaptive grace from the arrivals so far (offsets from the first): median + k * MAD
// (the median of the absolute deviations from the median), clamped to [lo, hi]. The median
// and MAD shrug off the one outlier a mean and standard deviation would follow.
std::chrono::steady_clock::duration grace_window(std::vector<std::chrono::steady_clock::duration> arrivals, double k,
                                                 std::chrono::milliseconds lo, std::chrono::milliseconds hi);

// The quorum a round needs now: the published one, or run.min_workers before one is.
std::size_t needed(const view& v, const options& opt);
// A Membership with at least `needed` workers: a round may open, a held StateRequest of a
// participant may be answered.
bool members_suffice(const view& v, const options& opt);

// The quorum the registry publishes: run.min_workers, until the run's tail. Once a worker
// has finished its steps (tail), the others may be fewer than min_workers and must still
// finish (workers that resynced after a fault are a round or two behind the rest).
std::uint32_t required_participants(std::size_t min_workers, std::size_t live_workers, bool tail);

const char* to_string(decision d);
const char* to_string(reason r);

}  // namespace atl::quorum
