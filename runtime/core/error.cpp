#include "runtime/core/error.hpp"

namespace atl {

const char* to_string(errc code) {
  switch (code) {
    case errc::none: return "none";
    case errc::malformed_frame: return "malformed_frame";
    case errc::frame_too_large: return "frame_too_large";
    case errc::too_many_frames: return "too_many_frames";
    case errc::version_mismatch: return "version_mismatch";
    case errc::cluster_mismatch: return "cluster_mismatch";
    case errc::unknown_peer: return "unknown_peer";
    case errc::stale_epoch: return "stale_epoch";
    case errc::wrong_round: return "wrong_round";
    case errc::duplicate: return "duplicate";
    case errc::tensor_mismatch: return "tensor_mismatch";
    case errc::checksum_mismatch: return "checksum_mismatch";
    case errc::not_finite: return "not_finite";
    case errc::unknown_fragment: return "unknown_fragment";
    case errc::storage_failure: return "storage_failure";
    case errc::invalid_config: return "invalid_config";
    case errc::not_participant: return "not_participant";
    case errc::not_ready: return "not_ready";
    case errc::timeout: return "timeout";
    case errc::unexpected_message: return "unexpected_message";
    case errc::sender_conflict: return "sender_conflict";
    case errc::storage_full: return "storage_full";
    case errc::malformed_id: return "malformed_id";
    case errc::digest_mismatch: return "digest_mismatch";
    case errc::bad_model: return "bad_model";
    case errc::bad_data: return "bad_data";
    case errc::model_mismatch: return "model_mismatch";
    case errc::handler_failed: return "handler_failed";
  }
  return "unknown_error";
}

std::string error::describe() const {
  std::string out = to_string(code);
  if (!message.empty()) out += ": " + message;
  return out;
}

}  // namespace atl
