#pragma once
// The worker's side of the run's data cursor (run.data_cursor; docs/design.md, "Every
// sample once"; the head's side is actors/registry/cursor.cpp). No CAF, no I/O: the worker
// feeds it the leases it gets and asks it for each step's units and each contribution's
// pieces.
//
//   lease arrives --> its positions wait, in order (a chunk given before is ignored)
//   step s trains --> the next per_step positions (crossing into the next lease if need
//                     be), as unit ids unit_at(seed, epoch, position); step s remembers them
//   fragment f contributes at step t --> the positions of the steps since f's last
//                     contribution (or the start), the DataTie's pieces
//
// A lease is wanted once fewer than a chunk of positions wait, so the next one is on its
// way before the steps need it.
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include "actors/decisions/data_cursor.hpp"

namespace atl {

class data_feed {
 public:
  using piece = data::piece;

  // `units`: the data's (N); `chunk`: units a lease hands out (C); `per_step`: units a step
  // trains; `fragments`: the run's sync units.
  data_feed(std::uint64_t units, std::uint64_t chunk, std::uint64_t per_step, std::size_t fragments);

  std::uint64_t units() const { return units_; }
  std::uint64_t chunk() const { return chunk_; }

  // False, and nothing fed: a lease of a chunk this feed was given before (the same answer
  // delivered twice; training it again would tie its positions twice).
  bool leased(data::chunk_id id, data::span positions, std::uint64_t seed);
  void run_out() { run_out_ = true; }  // the head said every epoch is leased
  // Every epoch leased and fewer positions left than a step trains: the run's data is done.
  bool exhausted() const { return run_out_ && waiting() < per_step_; }
  bool wants_lease() const { return !asked_ && !run_out_ && waiting() < chunk_; }
  // Fewer units wait than the next step trains: a step would block on the feed.
  bool starved() const { return !run_out_ && waiting() < per_step_; }
  void set_asked(bool asked) { asked_ = asked; }
  bool asked() const { return asked_; }

  // The units step `step` trains, recorded; nullopt (nothing taken) if fewer wait.
  std::optional<std::vector<std::uint64_t>> take_step(std::int64_t step);
  // The pieces of the steps fragment f trained since its last contribution, up to `until`
  // (exclusive): what its contribution at step `until` covers. Merged where they touch.
  std::vector<piece> contribution(std::size_t f, std::int64_t until);

 private:
  struct lease {
    data::chunk_id id;
    std::uint64_t next = 0, end = 0;
    std::uint64_t seed = 0;
  };
  std::uint64_t waiting() const;

  std::uint64_t units_, chunk_, per_step_;
  std::deque<lease> leases_;
  std::map<std::int64_t, std::vector<piece>> trained_;  // step -> where its units came from
  std::vector<std::int64_t> covered_until_;  // per fragment: steps before it are tied
  // Every chunk this feed was given: one a chunk per H steps, so small. A chunk the cursor
  // returned (no round took its work) and leased to this worker again is refused too: it
  // stays leased to us until we are gone, then returns, learned by nobody twice.
  std::set<data::chunk_id> given_;
  bool asked_ = false, run_out_ = false;
};

}  // namespace atl
