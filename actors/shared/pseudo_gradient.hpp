#pragma once
// Encoded values on the wire: a pseudo-gradient (or gradient) behind a Contribution, or a
// round's update of theta_global behind a RoundResult, encoded by a codec
// (runtime/algorithm/codec.hpp) and carried as raw tensor frames: the payload, then the
// fp32 scales for int8 and fp4.
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

// Fills the contribution's codec fields and appends its tensors to `msg`.
void put_contribution(schema::Contribution::Builder c, encoded_values&& values, wire::outgoing& msg);

// Decodes a received contribution to fp32 into `into`, checking it has `expected_count`
// values. Typed errors: tensor_mismatch (shape, sizes, codec), not_finite. `into` reuses its
// memory: a fragment-sized buffer allocated afresh costs a page fault per 4 KiB, which at
// 64 MiB took 0.3 s of system time on the VMs measured (tools/bench/averaging.py).
status take_contribution(const wire::message& msg, std::size_t expected_count, std::vector<float>& into);
// The same, kept encoded (checked by check_encoded, not decoded).
status take_encoded_contribution(const wire::message& msg, std::size_t expected_count, encoded_values& into);

// The same for a RoundResult that carries an update (isUpdate): sets isUpdate and the codec
// fields. take_round_update keeps the update encoded (checked as decode() checks it: shape,
// finite scales), since the worker decodes it block by block as it adds it to theta_global
// (fragment_sync::update_arrived, which refuses a sum that is not finite).
void put_round_update(schema::RoundResult::Builder r, encoded_values&& values, wire::outgoing& msg);
status take_round_update(const wire::message& msg, std::size_t expected_count, encoded_values& into);

// A round update's codec fields and frames, made once: every worker's RoundResult shares
// the frames' bytes instead of copying the payload.
struct round_update_frames {
  codec_kind kind = codec_kind::fp32;
  std::size_t chunk = 0;
  std::uint64_t count = 0;
  std::vector<wire::tensor> tensors;
};
round_update_frames make_round_update_frames(encoded_values&& values);
void put_round_update(schema::RoundResult::Builder r, const round_update_frames& frames, wire::outgoing& msg);

}  // namespace atl
