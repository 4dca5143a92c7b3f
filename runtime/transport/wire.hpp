#pragma once
// The wire format: one Cap'n Proto Envelope frame, then one raw frame per tensor.
//
// decode() is the single ingress point for bytes from the network: every check of
// RELIABILITY.md S6 that does not need actor state happens here (frame count and size
// caps, word alignment, reader limits, full traversal, version, tensor sizes and
// checksums). Callers get either a validated `message` or a typed error; no exception
// escapes. Cluster-id and epoch checks need per-process state and live in
// check_cluster() and the actors.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "runtime/core/byte_buffer.hpp"
#include "runtime/core/expected.hpp"
#include "schema/envelope.capnp.h"

namespace atl::wire {

// Bumped when a change is not readable by older peers. Version 1: the first wire.
constexpr std::uint16_t protocol_version = 1;

using bytes = byte_buffer;
using frames = std::vector<bytes>;

struct limits {
  std::size_t max_envelope_bytes = 1u << 20;  // 1 MiB: envelopes carry no tensor data
  std::size_t max_tensor_bytes = std::size_t{1} << 30;  // 1 GiB per raw frame
  std::size_t max_tensors = 8;  // raw frames behind one envelope
  // Validation's budget: decode walks the whole message twice (totalSize, then every
  // field) with this many words of pointer-reachable data, so amplification (pointers that
  // share their targets) is bounded here, before any actor reads.
  std::uint64_t traversal_limit_words = 1u << 18;  // 2 MiB of pointer-reachable data
  // The handler's budget, on a reader of its own: a message that passed validation is read
  // again by its handler, as often as it needs (a list's getter spends the list's words each
  // call). 64 whole walks of the largest valid message: a handler that reads more than that
  // is a defect, and throws into its actor's guard (actors/shared/guarded_handler.hpp).
  std::uint64_t handler_traversal_limit_words = std::uint64_t{64} << 18;
  int nesting_limit = 16;  // our schema nests at most 4 deep
  // Zero-sized list elements (structs with no data and no pointers) walked per message:
  // they cost no bytes, so without this a 200-byte frame could make decode walk 100k
  // structs. Other elements are bounded by the traversal limit, in proportion to their
  // bytes: a Membership of ten thousand workers decodes (until 2026-12-07 every pointer
  // list's elements counted, and such lists past 4096 were refused).
  std::size_t max_list_elements = 4096;
};

// A tensor as it travels: dtype, shape and raw little-endian bytes. Copies share the
// bytes (byte_buffer).
struct tensor {
  schema::DType dtype = schema::DType::FLOAT32;
  std::vector<std::uint64_t> shape;
  bytes data;
  // digest64 of `data`: set by decode() once it has checked the frame against it, or by a
  // sender that sends the same tensor more than once (encode() computes it when unset).
  std::optional<std::uint64_t> checksum;

  static tensor from_floats(const float* values, std::size_t count);
  // from_floats with the checksum computed now: for one tensor sent in several messages
  // (copies share the bytes), copied and hashed once rather than once per message.
  static tensor from_floats_hashed(const float* values, std::size_t count);
  std::size_t numel() const;
  // Copies float32 bytes out. Precondition: dtype is FLOAT32.
  std::vector<float> to_floats() const;
  // The same into `out`, reusing its memory (no page faults when it is large enough).
  void copy_floats_to(std::vector<float>& out) const;
};

std::size_t dtype_size(schema::DType dtype);

// An envelope under construction. Fill `envelope` (payload via envelope.initX()) and
// add tensors; the mailer sets the header fields and encodes.
class outgoing {
 public:
  outgoing();
  outgoing(const outgoing&) = delete;
  outgoing& operator=(const outgoing&) = delete;
  capnp::MallocMessageBuilder& builder() { return builder_; }

 private:
  capnp::MallocMessageBuilder builder_;  // declared first: `envelope` points into it

 public:
  schema::Envelope::Builder envelope;
  std::vector<tensor> tensors;
};

// Fills version and tensor descriptors (with checksums) and returns the frames.
// Consumes the tensors' bytes.
frames encode(outgoing& msg);

// A validated inbound message. Immutable; shared between threads by pointer.
class message {
 public:
  schema::Envelope::Reader envelope() const { return root_; }
  const std::vector<tensor>& tensors() const { return tensors_; }
  const std::string& sender() const { return sender_; }
  const std::string& receiver() const { return receiver_; }
  const std::string& cluster_id() const { return cluster_id_; }
  std::uint64_t epoch() const { return epoch_; }
  std::uint64_t seq() const { return seq_; }
  schema::Envelope::Which kind() const { return root_.which(); }
  std::size_t wire_bytes() const { return wire_bytes_; }
  // The CURVE public key (Z85) the link authenticated the sending process with; empty
  // for in-process delivery and plain TCP. Envelope fields are claims; this is not.
  const std::string& peer_key() const { return peer_key_; }
  // When it was decoded, on the receiving thread (steady clock): how long it then waited in
  // an actor's mailbox (a lease renewed by a heartbeat counts from its arrival).
  std::chrono::steady_clock::time_point decoded_at() const { return decoded_at_; }

 private:
  friend expected<std::shared_ptr<const message>> decode(frames&&, const limits&, std::string);
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
  schema::Envelope::Reader root_;
  std::vector<tensor> tensors_;
  std::string sender_, receiver_, cluster_id_, peer_key_;
  std::uint64_t epoch_ = 0, seq_ = 0;
  std::size_t wire_bytes_ = 0;
  std::chrono::steady_clock::time_point decoded_at_;
};
using message_ptr = std::shared_ptr<const message>;

// `peer_key`: what the link authenticated the sender as (see message::peer_key).
expected<message_ptr> decode(frames&& in, const limits& lim, std::string peer_key = {});

// Cluster fencing. `ours` empty means this process has not learned the cluster id yet
// (a node before its Welcome). Bootstrap payloads (Hello, ControlRequest) may carry an
// empty id; a process that has not learned its id accepts only a Welcome or Refusal.
status check_cluster(const message& msg, const std::string& ours);

// A readable name of a payload kind, for logs and refusals.
const char* kind_name(schema::Envelope::Which kind);

}  // namespace atl::wire
