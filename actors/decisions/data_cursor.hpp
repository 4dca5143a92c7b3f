#pragma once
// The run's data cursor (docs/design.md §1, "Every sample once"): hands the run's data to
// workers in leased chunks, and keeps for each fragment which positions of each epoch's
// order a committed round has learned from. Pure: its owner (the registry) feeds it what it
// hears (leases asked, contributions tied to their rounds, rounds committed, workers gone)
// and persists it with its snapshot.
//
// Epoch e's order is a permutation of the N units (unit_at); chunk c of e is positions
// [c C, min((c + 1) C, N)) of it. A chunk:
//
//   fresh --(1) lease--> leased(w) --(2) w contributes for fragment p in round r,
//     ^                    |            covering some of its positions: a tie (w, p, r)
//     |                    |
//     |                    +--(5) settled: no tie pending, and w gone (once every fragment
//     |                    |      committed a round of the epoch it went in, or later) or
//     |                    |      every fragment tied every position
//     |                    |        every fragment consumed every position --> consumed
//     |                    |        some fragment consumed some position ----> partial (kept,
//     |                    |                                                   the ledger says which)
//     +--- returned <------+        nothing consumed (w died first, or no round took its work)
//
//   (3) a commit of (p, r) consumes for p the ties (w, p, r) of each worker it took; a tie
//       it did not take waits for (p, r + 1), which may take it late (diloco.late_work);
//       after that it is lost for p (the worker resynced).
//   (4) a worker gone at membership epoch E: its chunks settle once their pending ties are
//       resolved and every fragment has committed a round opened at E or later. Such a
//       round has not the worker among its participants and carries any late work of it,
//       so no report still to come can tie the worker's work: returned earlier, a chunk
//       was leased again while a lagging report (reports go one at a time, and wait out a
//       head restart) still had the dead worker's contribution, and the model learned its
//       units twice (the seeded fault tier found it). A finished run leases nothing
//       more: its end settles them at once.
//   (6) returned or partial --> leased: a tie of the gone worker that held it, come late (in
//       a RoundReport sent again after a head restart), while no one leased it since.
//   (1) leases a returned chunk first (oldest first), then the next fresh one; once the
//       leasing epoch has no fresh chunk left, epoch e + 1's, up to the run's epochs.
//   An epoch ends when every chunk of it is consumed or partial.
//
// So the committed model learns each unit of an epoch at most once per fragment, and
// exactly once unless its worker died between its fragments' commits (partial).
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl::data {

// The unit at `position` of epoch `epoch`'s order: a permutation of [0, units) seeded by
// (seed, epoch), computed alone (a Feistel network with cycle walking), so nothing of size
// N is kept.
std::uint64_t unit_at(std::uint64_t seed, std::uint64_t epoch, std::uint64_t position, std::uint64_t units);

// Each chunk keeps its spans per fragment: a run has at most as many as it has sync units
// (runtime/process/config.cpp refuses more than 4096 coordinators).
constexpr std::uint32_t max_fragments = 4096;

struct cursor_config {
  std::uint64_t units = 0;  // N
  std::uint64_t chunk = 0;  // C: units a lease hands out
  std::uint32_t fragments = 1;  // P
  std::uint64_t epochs = 0;  // the run's; 0: no end
};

struct chunk_id {
  std::uint64_t epoch = 0, index = 0;
  bool operator<(const chunk_id& o) const { return epoch != o.epoch ? epoch < o.epoch : index < o.index; }
  bool operator==(const chunk_id& o) const { return epoch == o.epoch && index == o.index; }
};

// Positions [begin, end) of an epoch's order.
struct span {
  std::uint64_t begin = 0, end = 0;
  bool operator==(const span& o) const { return begin == o.begin && end == o.end; }
};

// Positions of one chunk a contribution trained on (a DataPiece on the wire).
struct piece {
  chunk_id chunk;
  span positions;
  bool operator==(const piece& o) const { return chunk == o.chunk && positions == o.positions; }
};

// A committed round's share of a chunk, for the ledger.
struct consumption {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  span positions;
  bool operator==(const consumption& o) const {
    return fragment == o.fragment && round == o.round && positions == o.positions;
  }
};

enum class chunk_state : std::uint8_t { leased, consumed, partial, returned };
const char* to_string(chunk_state s);

struct progress {
  std::uint64_t epoch = 0;  // the first epoch not ended
  std::uint64_t units = 0;  // N
  std::uint64_t consumed = 0;  // units of `epoch` every fragment learned
  std::uint64_t in_flight = 0;  // units of leased chunks of any epoch, not yet settled
  std::uint64_t returned = 0;  // units of returned chunks waiting for a lease
  std::uint64_t partial = 0;  // units of `epoch` in partial chunks
  bool finished = false;  // every epoch of the run ended
};

// Everything a cursor holds, as plain values: what its owner persists, and restores a
// cursor from (a restarted head, a new leader).
struct cursor_snapshot {
  struct chunk_entry {
    chunk_id id;
    chunk_state state = chunk_state::leased;
    std::string holder;
    bool holder_gone = false;
    std::vector<std::vector<span>> tied, consumed;  // per fragment
    std::vector<consumption> ledger;
    std::uint64_t gone_epoch = 0;  // the membership epoch its holder went in (holder_gone)
  };
  struct tie_entry {
    std::string worker;
    std::uint32_t fragment = 0;
    std::uint64_t round = 0;
    chunk_id chunk;
    span positions;
    bool missed_once = false;  // its round closed without it; the next may take it late
  };
  struct commit_entry {
    std::uint32_t fragment = 0;
    std::uint64_t round = 0;
    std::vector<std::string> taken, late;
  };
  cursor_config config;
  std::uint64_t lease_epoch = 0, next_fresh = 0;
  std::vector<chunk_entry> chunks;
  std::vector<chunk_id> returned;
  std::vector<tie_entry> ties;
  std::vector<commit_entry> recent;
  // Per fragment: the membership epoch of its newest committed round (empty: all 0).
  std::vector<std::uint64_t> commit_epochs;
};

class data_cursor {
 public:
  // Refuses (invalid_config) no units, a chunk of 0, and no fragments or more than
  // max_fragments.
  static expected<data_cursor> make(const cursor_config& config);
  // A cursor from a snapshot; one that does not hold together (a chunk outside its epoch,
  // spans outside their chunk, a tie or a returned chunk naming a chunk not in that state,
  // the wrong number of fragments) is refused (bad_data), as a damaged store would be.
  static expected<data_cursor> restore(const cursor_snapshot& snap);
  cursor_snapshot snapshot() const;
  // What a save in parts reads (actors/shared/cursor_record.hpp, update_cursor_parts): all
  // but the chunks; the chunks of [first, last]; the chunks changed since the last call
  // (every change to a chunk is noted; none after restore), so that a save costs what
  // changed, not the run's history.
  cursor_snapshot snapshot_without_chunks() const;
  std::vector<cursor_snapshot::chunk_entry> chunks_between(chunk_id first, chunk_id last) const;
  std::vector<chunk_id> take_changed();
  std::size_t chunk_count() const { return chunks_.size(); }

  // (1) The next chunk for `worker`, nullopt once every epoch of the run is leased.
  std::optional<chunk_id> lease(const std::string& worker);
  // (2) worker's contribution to (fragment, round) covers `positions` of `chunk` (or (6)).
  // Refused, changing nothing: a chunk not leased to the worker (not_participant), a fragment out of
  // range (unknown_fragment), positions outside the chunk or none (bad_data), positions
  // tied before for the fragment (duplicate).
  status tie(const std::string& worker, std::uint32_t fragment, std::uint64_t round, chunk_id chunk, span positions);
  // (2) for every piece of one contribution, all or none: the first refusal undoes the
  // pieces tied before it and is returned. Its cost is the pieces', not the cursor's (a
  // report of M contributions used to copy the whole cursor M times).
  status tie_all(const std::string& worker, std::uint32_t fragment, std::uint64_t round,
                 const std::vector<piece>& pieces);
  // (3) fragment's round, opened at membership `epoch`, committed, taking the on-time
  // contributions of `taken` and the previous round's of `late`.
  void committed(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch,
                 const std::vector<std::string>& taken, const std::vector<std::string>& late);
  // (4) The worker is gone (dead or left) from membership `epoch` on: its chunks settle once
  // no tie of theirs waits and every fragment committed a round of that epoch or later.
  void worker_gone(const std::string& worker, std::uint64_t epoch);
  // The run is over: nothing is leased again, so gone workers' chunks settle without
  // waiting for more commits (4).
  void run_finished();
  // The newest round of `fragment` committed here; nullopt before the first. A RoundReport
  // for it or an older round was applied already (its ties and commit are not again).
  std::optional<std::uint64_t> last_committed(std::uint32_t fragment) const;

  std::optional<chunk_state> state_of(chunk_id chunk) const;  // nullopt: never leased
  span positions_of(chunk_id chunk) const;
  const std::vector<consumption>& ledger_of(chunk_id chunk) const;  // empty if none
  progress progress_now() const;
  const cursor_config& config() const { return config_; }

 private:
  using tie_record = cursor_snapshot::tie_entry;
  struct commit_record {
    std::vector<std::string> taken, late;
  };
  struct chunk_record {
    chunk_state state = chunk_state::leased;
    std::string holder;
    bool holder_gone = false;
    std::vector<std::vector<span>> tied, consumed;  // per fragment, merged and sorted
    std::vector<consumption> ledger;
    std::uint64_t gone_epoch = 0;
  };

  explicit data_cursor(const cursor_config& config) : config_(config) {}
  std::uint64_t chunks_per_epoch() const;
  void consume(const tie_record& t, std::uint64_t committed_in);
  void settle(chunk_id chunk);
  bool pending(chunk_id chunk) const;
  bool reopens(const chunk_record& c, chunk_id chunk, const std::string& worker) const;
  // Every fragment committed a round opened at `epoch` or later.
  bool every_fragment_committed_since(std::uint64_t epoch) const;

  cursor_config config_;
  std::map<chunk_id, chunk_record> chunks_;
  std::vector<chunk_id> returned_;  // oldest first
  std::vector<tie_record> ties_;  // pending
  std::uint64_t lease_epoch_ = 0, next_fresh_ = 0;
  // The last two commits of each fragment: a tie that arrives after its round's commit (the
  // two travel apart) is resolved against them.
  std::map<std::uint32_t, std::map<std::uint64_t, commit_record>> recent_;
  std::vector<std::uint64_t> commit_epochs_;  // per fragment: its newest commit's epoch
  // Leased chunks of gone holders that wait for the fragments' commits (derived, not stored).
  std::set<chunk_id> awaiting_commits_;
  std::set<chunk_id> changed_;  // since take_changed (not stored)
};

}  // namespace atl::data
