#include "actors/keeper/keeper_messages.hpp"

namespace atl {

expected<checkpoint_view> commit_values(const wire::message& msg) {
  const auto& t = msg.tensors();
  if (t.size() != 2 && t.size() != 3)
    return make_error(errc::tensor_mismatch, "commit needs theta, momentum and perhaps residual tensors");
  for (const auto& frame : t)
    if (frame.dtype != schema::DType::FLOAT32) return make_error(errc::tensor_mismatch, "commit tensors must be fp32");
  for (const auto& frame : t)
    if (frame.data.size() != t[0].data.size())
      return make_error(errc::tensor_mismatch, "theta, momentum and residual sizes differ");
  checkpoint_view v;
  v.theta = reinterpret_cast<const float*>(t[0].data.data());
  v.momentum = reinterpret_cast<const float*>(t[1].data.data());
  if (t.size() == 3) v.residual = reinterpret_cast<const float*>(t[2].data.data());
  v.count = t[0].data.size() / sizeof(float);
  v.theta_digest = t[0].checksum;  // decode checked the frame against it
  return v;
}

void write_writing_notice(wire::outgoing& out, std::uint32_t fragment, std::uint64_t round) {
  auto w = out.envelope.initCommitAck();
  w.setFragment(fragment);
  w.setRound(round);
  w.setWriting(true);
}

void write_commit_ack(wire::outgoing& out, std::uint32_t fragment, std::uint64_t round, std::uint64_t digest,
                      const status& result) {
  auto ack = out.envelope.initCommitAck();
  ack.setFragment(fragment);
  ack.setRound(round);
  ack.setOk(!result);
  ack.setError(result.describe());
  ack.setBehind(result.code == errc::not_ready);
  ack.setDigest(digest);
}

}  // namespace atl
