#pragma once
// Contributions on the wire: a pseudo-gradient (or gradient) encoded by a codec
// (runtime/algorithm/codec.hpp) and carried as raw tensor frames behind a Contribution.
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/wire.hpp"

namespace atl {

// Fills the contribution's codec fields and appends its tensors to `msg`.
void put_contribution(schema::Contribution::Builder c, encoded_values&& values, wire::outgoing& msg);

// Decodes a received contribution to fp32, checking it has `expected_count` values.
// Typed errors: tensor_mismatch (shape, sizes, codec), not_finite.
expected<std::vector<float>> take_contribution(const wire::message& msg, std::size_t expected_count);

}  // namespace atl
