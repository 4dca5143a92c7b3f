#pragma once
// Atoll's error codes. Numbers are pinned: they travel in Refusal messages and are
// written to metrics, so never renumber; append new codes at the end.
#include <cstdint>
#include <string>

namespace atl {

enum class errc : std::uint16_t {
  none = 0,
  malformed_frame = 1,  // bytes that are not a valid envelope
  frame_too_large = 2,  // a frame over the configured cap
  too_many_frames = 3,  // more raw frames than the cap, or a count mismatch
  version_mismatch = 4,  // envelope.version differs from ours
  cluster_mismatch = 5,  // envelope.clusterId differs from ours
  unknown_peer = 6,  // receiver or sender not known here
  stale_epoch = 7,  // message from an older membership epoch
  wrong_round = 8,  // contribution for a round other than the open one
  duplicate = 9,  // second contribution of a worker to one round
  tensor_mismatch = 10,  // tensor shape, dtype or size not as expected
  checksum_mismatch = 11,  // raw frame bytes do not match their checksum
  not_finite = 12,  // NaN or infinity in a contribution
  unknown_fragment = 13,  // fragment id out of range
  storage_failure = 14,  // RocksDB refused a read or a write
  invalid_config = 15,  // config key unknown, of the wrong type or out of range
  not_participant = 16,  // sender is not a participant of the round
  not_ready = 17,  // state not loaded yet; try again
  timeout = 18,  // no answer in time
  unexpected_message = 19,  // payload not handled by this actor
  sender_conflict = 20,  // sender id already speaks from another live connection
  storage_full = 21,  // the disk is full; the write was not made
  malformed_id = 22,  // an actor id that fits none of runtime/core/actor_id.hpp's kinds
  digest_mismatch = 23,  // a state that does not have the digest it was sent with
  bad_model = 24,  // a model file that cannot be loaded or breaks the model contract
  bad_data = 25,  // a token file that is missing, empty, too short or wrongly sized
  model_mismatch = 26,  // a node whose model differs from the head's
  handler_failed = 27,  // the actor's handler threw on a valid message: dropped, the actor goes on
};
constexpr errc last_errc = errc::handler_failed;  // the highest code (keep it the last one)

// Short stable name, e.g. "stale_epoch".
const char* to_string(errc code);

// An error as a value: a code plus a human-readable context.
struct error {
  errc code = errc::none;
  std::string message;

  explicit operator bool() const { return code != errc::none; }
  std::string describe() const;  // "stale_epoch: epoch 3 < current 4"
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }

}  // namespace atl
