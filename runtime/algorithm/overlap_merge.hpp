#pragma once
// A worker's merge of a round's theta_global under Streaming DiLoCo's overlap: it
// contributed at the sync step, trained tau more steps, and merges then,
//   local = alpha * local + (1 - alpha) * global
// With alpha = 0 the tau steps' training of the fragment is lost: it is in neither the
// contribution (made before them) nor, under error feedback, the residual. Carrying it
// (diloco.carry_overlap) merges as if those steps had been taken from the new global:
//   local = alpha * local + (1 - alpha) * (global + local - at_contribution)
// and the next contribution, global - local, then counts them once.
#include <cstddef>

namespace atl {

// `merged` holds alpha * local + (1 - alpha) * global; adds (1 - alpha) * (local -
// at_contribution), value by value.
inline void carry_since_contribution(float* merged, const float* local, const float* at_contribution, float alpha,
                                     std::size_t n) {
  const float keep = 1.0f - alpha;
  for (std::size_t i = 0; i < n; ++i) merged[i] += keep * (local[i] - at_contribution[i]);
}

}  // namespace atl
