#pragma once
// Slices of a fragment, for sharded rounds (docs/design.md, "Sharded rounds"): a fragment's
// round reduced in S contiguous slices, each by a coordinator of its own, so that no one
// process carries every contribution.
//
// Everything in a round is element-wise or chunk-wise: the weighted average, the Nesterov
// step, every codec (a scale, a sparse selection per chunk) and error feedback. A slice
// that starts on a chunk boundary therefore has the very bytes, scales and state the whole
// fragment has on that range. Slices here start on a granule that is also a whole number of
// the outer step's blocks, so even a block whose change overflows (the step then keeps that
// block's exact theta: runtime/algorithm/outer_round.hpp) falls inside one slice. A round
// reduced in slices and the same round reduced whole reach identical theta_global, momentum
// and residual, bit for bit (tests/decisions/slices_test.cpp).
#include <cstddef>
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/algorithm/outer_round.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

// Values [first, first + count) of a fragment.
struct fragment_slice {
  std::size_t first = 0;
  std::size_t count = 0;
  bool operator==(const fragment_slice& o) const { return first == o.first && count == o.count; }
};

// What slices start on: a multiple of the outer step's block and of the contributions'
// chunk (0: a codec without chunks).
std::size_t slice_granule(const outer_rule& rule, std::size_t contribution_chunk);

// `shards` contiguous slices covering [0, values): each a whole number of granules but the
// last, sizes within one granule of each other. Fewer when the fragment has fewer granules
// (no slice is empty); one slice of nothing for an empty fragment.
std::vector<fragment_slice> plan_slices(std::size_t values, std::size_t granule, std::size_t shards);

// What diloco.shards = auto becomes for a run (the default; docs/design.md, "Sharded rounds"):
// a slice for each worker the run starts with (`members`, run.min_workers), since S = M is
// what spreads a round over every node's link as an all-reduce does; at most
// `max_auto_shards`, since a worker sends to and hears from S coordinators each round and
// the head hears from P x S; and no more than the smallest fragment has granules, so every
// fragment has S slices (plan_slices). At least 1; at most `max_units` / fragments in all.
inline constexpr std::size_t max_auto_shards = 8;
std::size_t auto_shards(const std::vector<std::size_t>& fragment_values, std::size_t granule, std::size_t members,
                        std::size_t max_units);

// The bytes and scales of `whole` for the slice: what encode() writes for the slice's values
// alone. The slice must lie inside the tensor and, for a codec with chunks, start on a chunk
// and end on one (or at the end); invalid_config otherwise.
expected<encoded_values> cut_encoded(const encoded_values& whole, const fragment_slice& slice);

}  // namespace atl
