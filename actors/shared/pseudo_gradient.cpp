#include "actors/shared/pseudo_gradient.hpp"

#include <cmath>
#include <cstring>

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

void put_tensors(encoded_values&& values, wire::outgoing& msg) {
  wire::tensor payload;
  if (values.kind == codec_kind::fp32) {
    payload.dtype = schema::DType::FLOAT32;
    payload.shape = {values.count};
  } else {
    payload.dtype = schema::DType::UINT8;
    payload.shape = {values.payload.size()};
  }
  payload.data = std::move(values.payload);
  msg.tensors.push_back(std::move(payload));
  if (!values.scales.empty())
    msg.tensors.push_back(wire::tensor::from_floats(values.scales.data(), values.scales.size()));
}

// The encoded values a Contribution or RoundResult carries, checked as decode() checks
// them, into `out` (its memory reused). `what` names the message in errors
// ("contribution", "round update").
status take_encoded(const wire::message& msg, schema::PseudoGradientCodec codec, std::uint32_t chunk,
                    std::uint64_t count, std::size_t expected_count, const char* what, encoded_values& out) {
  const auto kind = static_cast<codec_kind>(codec);
  if (kind > last_codec) return make_error(errc::tensor_mismatch, std::string(what) + " with an unknown codec");
  if (count != expected_count)
    return make_error(errc::tensor_mismatch, std::string(what) + " of " + std::to_string(count) +
                                                 " values, fragment has " + std::to_string(expected_count));
  const bool scaled = has_scales(kind);
  const auto& tensors = msg.tensors();
  if (tensors.size() != (scaled ? 2u : 1u))
    return make_error(errc::tensor_mismatch, std::string(to_string(kind)) + " " + what + " with " +
                                                 std::to_string(tensors.size()) + " tensors");
  if (scaled && tensors[1].dtype != schema::DType::FLOAT32)
    return make_error(errc::tensor_mismatch, "scales must be fp32");
  if (kind == codec_kind::fp32 && tensors[0].dtype != schema::DType::FLOAT32)
    return make_error(errc::tensor_mismatch, std::string("fp32 ") + what + " in a tensor that is not fp32");
  out.kind = kind;
  out.count = expected_count;
  out.chunk = scaled ? chunk : 0;
  out.payload.assign(tensors[0].data.begin(), tensors[0].data.end());
  if (scaled) out.scales = tensors[1].to_floats();
  else out.scales.clear();
  return check_encoded(out);
}

// Decodes into `out` (its memory reused).
status take_tensors(const wire::message& msg, schema::PseudoGradientCodec codec, std::uint32_t chunk,
                    std::uint64_t count, std::size_t expected_count, const char* what, std::vector<float>& out) {
  const auto& tensors = msg.tensors();
  if (static_cast<codec_kind>(codec) == codec_kind::fp32 && count == expected_count && tensors.size() == 1 &&
      tensors[0].dtype == schema::DType::FLOAT32 && tensors[0].data.size() == expected_count * sizeof(float)) {
    tensors[0].copy_floats_to(out);  // the frame is the values: one copy out, no staging copy
    return {};
  }
  encoded_values enc;
  if (auto err = take_encoded(msg, codec, chunk, count, expected_count, what, enc)) return err;
  out.resize(expected_count);
  return decode(enc, out.data());
}

// The codec fields of a Contribution or a RoundResult, and the tensors behind them.
template <class Builder>
void put_encoded(Builder b, encoded_values&& values, wire::outgoing& msg) {
  b.setCodec(static_cast<schema::PseudoGradientCodec>(values.kind));
  b.setChunk(static_cast<std::uint32_t>(values.chunk));
  b.setCount(values.count);
  put_tensors(std::move(values), msg);
}

}  // namespace

void put_contribution(schema::Contribution::Builder c, encoded_values&& values, wire::outgoing& msg) {
  put_encoded(c, std::move(values), msg);
}

status take_contribution(const wire::message& msg, std::size_t expected_count, std::vector<float>& into) {
  const auto c = msg.envelope().getContribution();
  return take_tensors(msg, c.getCodec(), c.getChunk(), c.getCount(), expected_count, "contribution", into);
}

status take_encoded_contribution(const wire::message& msg, std::size_t expected_count, encoded_values& into) {
  const auto c = msg.envelope().getContribution();
  return take_encoded(msg, c.getCodec(), c.getChunk(), c.getCount(), expected_count, "contribution", into);
}

void put_round_update(schema::RoundResult::Builder r, encoded_values&& values, wire::outgoing& msg) {
  put_round_update(r, make_round_update_frames(std::move(values)), msg);
}

round_update_frames make_round_update_frames(encoded_values&& values) {
  round_update_frames frames;
  frames.kind = values.kind;
  frames.chunk = values.chunk;
  frames.count = values.count;
  wire::outgoing holder;  // put_tensors appends to a message; only its tensors are kept
  put_tensors(std::move(values), holder);
  frames.tensors = std::move(holder.tensors);
  // Hashed once here rather than once per message: every contributor's result (and the
  // round's record, the same frames) carries them.
  for (auto& t : frames.tensors) t.checksum = digest64(t.data.data(), t.data.size());
  return frames;
}

void put_round_update(schema::RoundResult::Builder r, const round_update_frames& frames, wire::outgoing& msg) {
  r.setIsUpdate(true);
  r.setCodec(static_cast<schema::PseudoGradientCodec>(frames.kind));
  r.setChunk(static_cast<std::uint32_t>(frames.chunk));
  r.setCount(frames.count);
  msg.tensors.insert(msg.tensors.end(), frames.tensors.begin(), frames.tensors.end());
}

status take_round_update(const wire::message& msg, std::size_t expected_count, encoded_values& into) {
  const auto r = msg.envelope().getRoundResult();
  return take_encoded(msg, r.getCodec(), r.getChunk(), r.getCount(), expected_count, "round update", into);
}

}  // namespace atl
