#include "actors/shared/commit_record.hpp"

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

wire::tensor frame_of(const byte_buffer& bytes, schema::DType dtype, std::size_t element) {
  wire::tensor t;
  t.dtype = dtype;
  t.shape = {bytes.size() / element};
  t.data = bytes;
  t.checksum = digest64(bytes.data(), bytes.size());
  return t;
}

}  // namespace

std::vector<wire::tensor> record_tensors(const round_record& record) {
  std::vector<wire::tensor> out;
  for (const auto& in : record.inputs) {
    if (in.codec == codec_kind::fp32) out.push_back(frame_of(in.payload, schema::DType::FLOAT32, sizeof(float)));
    else out.push_back(frame_of(in.payload, schema::DType::UINT8, 1));
    if (has_scales(in.codec)) out.push_back(frame_of(in.scales, schema::DType::FLOAT32, sizeof(float)));
  }
  return out;
}

void put_commit_record(schema::CommitRequest::Builder req, const round_record& record) {
  req.setFragment(record.fragment);
  req.setRound(record.round);
  req.setLogged(true);
  req.setThetaDigest(record.theta_digest);
  req.setCount(record.count);
  req.setOuterLr(record.rule.outer.lr);
  req.setOuterMomentum(record.rule.outer.momentum);
  req.setResultCodec(static_cast<schema::PseudoGradientCodec>(record.rule.result_codec));
  req.setResultChunk(static_cast<std::uint32_t>(record.rule.result_chunk));
  req.setAveraged(record.form == record_form::average);
  req.setPublished(record.form == record_form::result);
  auto inputs = req.initInputs(static_cast<unsigned>(record.inputs.size()));
  for (unsigned i = 0; i < record.inputs.size(); ++i) {
    const auto& in = record.inputs[i];
    inputs[i].setWorker(in.worker);
    inputs[i].setWeight(in.weight);
    inputs[i].setCodec(static_cast<schema::PseudoGradientCodec>(in.codec));
    inputs[i].setChunk(in.chunk);
  }
}

expected<round_record> take_commit_record(const wire::message& msg) {
  const auto req = msg.envelope().getCommitRequest();
  round_record r;
  r.fragment = req.getFragment();
  r.round = req.getRound();
  r.epoch = msg.epoch();
  r.count = req.getCount();
  r.theta_digest = req.getThetaDigest();
  r.rule.outer = {req.getOuterLr(), req.getOuterMomentum()};
  r.rule.result_codec = static_cast<codec_kind>(req.getResultCodec());
  r.rule.result_chunk = req.getResultChunk();
  if (req.getAveraged() && req.getPublished())
    return make_error(errc::tensor_mismatch, "round record: both averaged and published");
  r.form = req.getPublished() ? record_form::result : req.getAveraged() ? record_form::average : record_form::inputs;
  const auto& tensors = msg.tensors();
  std::size_t next = 0;
  auto frame = [&](schema::DType dtype, const std::string& what) -> expected<byte_buffer> {
    if (next >= tensors.size())
      return make_error(errc::tensor_mismatch,
                        "round record: " + std::to_string(tensors.size()) + " tensors are too few (" + what + ")");
    const auto& t = tensors[next++];
    if (t.dtype != dtype) return make_error(errc::tensor_mismatch, "round record: " + what + " has the wrong dtype");
    return t.data;
  };
  for (const auto in : req.getInputs()) {
    round_input ri;
    ri.worker = in.getWorker().cStr();
    ri.weight = in.getWeight();
    ri.codec = static_cast<codec_kind>(in.getCodec());
    ri.chunk = in.getChunk();
    if (ri.codec > last_codec) return make_error(errc::tensor_mismatch, "round record: unknown codec of " + ri.worker);
    auto payload =
        frame(ri.codec == codec_kind::fp32 ? schema::DType::FLOAT32 : schema::DType::UINT8, ri.worker + "'s payload");
    if (!payload) return payload.err();
    ri.payload = *payload;
    if (has_scales(ri.codec)) {
      auto scales = frame(schema::DType::FLOAT32, ri.worker + "'s scales");
      if (!scales) return scales.err();
      ri.scales = *scales;
    }
    r.inputs.push_back(std::move(ri));
  }
  if (next != tensors.size())
    return make_error(errc::tensor_mismatch,
                      "round record: " + std::to_string(tensors.size() - next) + " tensors more than its inputs name");
  if (auto err = check_record(r)) return err;
  return r;
}

}  // namespace atl
