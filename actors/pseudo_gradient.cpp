#include "actors/pseudo_gradient.hpp"

#include <cstring>

namespace atl {

void put_contribution(schema::Contribution::Builder c, encoded_values&& values, wire::outgoing& msg) {
  c.setCodec(static_cast<schema::PseudoGradientCodec>(values.kind));
  c.setChunk(static_cast<std::uint32_t>(values.chunk));
  c.setCount(values.count);
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

expected<std::vector<float>> take_contribution(const wire::message& msg, std::size_t expected_count) {
  const auto c = msg.envelope().getContribution();
  const auto kind = static_cast<codec_kind>(c.getCodec());
  if (kind > codec_kind::fp4) return make_error(errc::tensor_mismatch, "unknown codec");
  if (c.getCount() != expected_count)
    return make_error(errc::tensor_mismatch,
                      std::to_string(c.getCount()) + " values, fragment has " + std::to_string(expected_count));
  const bool scaled = kind == codec_kind::int8 || kind == codec_kind::fp4;
  const auto& tensors = msg.tensors();
  if (tensors.size() != (scaled ? 2u : 1u))
    return make_error(errc::tensor_mismatch, std::string(to_string(kind)) + " contribution with " +
                                                 std::to_string(tensors.size()) + " tensors");
  if (scaled && tensors[1].dtype != schema::DType::FLOAT32)
    return make_error(errc::tensor_mismatch, "scales must be fp32");
  encoded_values enc;
  enc.kind = kind;
  enc.count = expected_count;
  enc.chunk = scaled ? c.getChunk() : 0;
  enc.payload = tensors[0].data;
  if (scaled) enc.scales = tensors[1].to_floats();
  std::vector<float> out(expected_count);
  if (auto err = decode(enc, out.data())) return err;
  return out;
}

}  // namespace atl
