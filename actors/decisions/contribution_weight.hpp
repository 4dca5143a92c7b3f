#pragma once
// How much a contribution counts in its round's average (diloco.weighting), apart from all
// I/O. The coordinator averages sum_i w_i x_i / sum_i w_i (runtime/algorithm/outer_round),
// the round log records each w_i, and the keepers replay with them.
//
//   samples   w = the samples (tokens, for the language-model examples) the worker's steps
//             reported since the unit's last sync: a worker that trained more since (more
//             steps, or larger batches) counts for more. Workers that did the same steps on
//             the same batches weigh the same, and the average has the bits of a uniform
//             one (w / (n w) rounds as 1 / n while n w is exact: below 2^24).
//             Steps that reported no samples (a Python loop that does not pass `samples=`)
//             count one each: give `samples=` in every worker of a run, or use uniform.
//   uniform   w = 1 for every contribution.
//
// Never 0: a worker that trained nothing since its last sync still counts as one.
#include <cstdint>

namespace atl {

struct trained_since_sync {
  std::int64_t samples = 0;  // reported by the steps
  std::int64_t steps_without_samples = 0;  // steps that reported none
  void step(std::int64_t reported) { (reported > 0 ? samples : steps_without_samples) += reported > 0 ? reported : 1; }
};

float contribution_weight(bool by_samples, const trained_since_sync& trained);

}  // namespace atl
