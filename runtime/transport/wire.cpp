#include "runtime/transport/wire.hpp"

#include <cstring>

#include <capnp/any.h>
#include <capnp/dynamic.h>
#include <kj/exception.h>

#include "runtime/core/digest.hpp"

namespace atl::wire {

std::size_t dtype_size(schema::DType dtype) {
  switch (dtype) {
    case schema::DType::FLOAT32: return 4;
    case schema::DType::BFLOAT16:
    case schema::DType::FLOAT16: return 2;
    case schema::DType::INT8:
    case schema::DType::UINT8: return 1;
  }
  return 0;
}

tensor tensor::from_floats(const float* values, std::size_t count) {
  tensor t;
  t.dtype = schema::DType::FLOAT32;
  t.shape = {count};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(values);
  t.data.assign(bytes, bytes + count * sizeof(float));  // one pass: no zero fill first
  return t;
}

tensor tensor::from_floats_hashed(const float* values, std::size_t count) {
  auto t = from_floats(values, count);
  t.checksum = digest64(t.data.data(), t.data.size());
  return t;
}

std::size_t tensor::numel() const {
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

std::vector<float> tensor::to_floats() const {
  // operator new aligns the bytes for any float; one pass, no zero fill first.
  const auto* values = reinterpret_cast<const float*>(data.data());
  return std::vector<float>(values, values + data.size() / sizeof(float));
}

void tensor::copy_floats_to(std::vector<float>& out) const {
  const auto* values = reinterpret_cast<const float*>(data.data());
  out.assign(values, values + data.size() / sizeof(float));
}

outgoing::outgoing() : envelope(nullptr) { envelope = builder_.initRoot<schema::Envelope>(); }

frames encode(outgoing& msg) {
  msg.envelope.setVersion(protocol_version);
  auto descs = msg.envelope.initTensors(static_cast<unsigned>(msg.tensors.size()));
  for (unsigned i = 0; i < msg.tensors.size(); ++i) {
    const auto& t = msg.tensors[i];
    auto d = descs[i];
    d.setDtype(t.dtype);
    d.setCodec(schema::Codec::RAW);
    auto shape = d.initShape(static_cast<unsigned>(t.shape.size()));
    for (unsigned k = 0; k < t.shape.size(); ++k) shape.set(k, t.shape[k]);
    d.setByteSize(t.data.size());
    d.setChecksum(t.checksum ? *t.checksum : digest64(t.data.data(), t.data.size()));
  }
  frames out;
  out.reserve(1 + msg.tensors.size());
  auto flat = capnp::messageToFlatArray(msg.builder());
  auto head = flat.asBytes();
  out.emplace_back(head.begin(), head.end());
  for (auto& t : msg.tensors) out.push_back(std::move(t.data));
  msg.tensors.clear();
  return out;
}

namespace {

// Validates a tensor descriptor against its raw frame.
status check_tensor(schema::TensorDesc::Reader desc, const bytes& frame, const limits& lim) {
  if (frame.size() > lim.max_tensor_bytes)
    return make_error(errc::frame_too_large, "tensor frame of " + std::to_string(frame.size()) + " bytes");
  if (desc.getCodec() != schema::Codec::RAW) return make_error(errc::tensor_mismatch, "unknown codec");
  const std::size_t elem = dtype_size(desc.getDtype());
  if (elem == 0) return make_error(errc::tensor_mismatch, "unknown dtype");
  // Multiply with overflow checks: a hostile shape must not wrap around.
  std::uint64_t numel = 1;
  for (auto d : desc.getShape()) {
    if (d != 0 && numel > lim.max_tensor_bytes / d) return make_error(errc::tensor_mismatch, "shape too large");
    numel *= d;
  }
  if (numel * elem != desc.getByteSize() || desc.getByteSize() != frame.size())
    return make_error(errc::tensor_mismatch,
                      "frame size " + std::to_string(frame.size()) + " does not match its descriptor");
  if (digest64(frame.data(), frame.size()) != desc.getChecksum())
    return make_error(errc::checksum_mismatch, "tensor frame checksum");
  return {};
}

// Whether a list of structs encodes its elements in no words at all (no data, no pointers).
bool occupies_no_words(const capnp::DynamicList::Reader& list) {
  const auto first = list.as<capnp::AnyList>().as<capnp::List<capnp::AnyStruct>>()[0];
  return first.getDataSection().size() == 0 && first.getPointerSection().size() == 0;
}

// Cap'n Proto checks a field's type only when it is read. Read every field the schema
// knows, so that a pointer of the wrong kind (a bit flip turning a list of structs into
// a list of bytes, say) throws here, inside decode's try, and never in an actor.
// `budget` counts down the pointer-list elements still allowed (limits::max_list_elements).
void read_every_field(const capnp::DynamicValue::Reader& value, std::size_t& budget) {
  switch (value.getType()) {
    case capnp::DynamicValue::STRUCT: {
      const auto s = value.as<capnp::DynamicStruct>();
      for (auto field : s.getSchema().getNonUnionFields())
        if (s.has(field)) read_every_field(s.get(field), budget);
      KJ_IF_MAYBE (active, s.which()) {
        read_every_field(s.get(*active), budget);
      } else if (s.getSchema().getUnionFields().size() > 0) {
        KJ_FAIL_REQUIRE("unknown union member");
      }
      break;
    }
    case capnp::DynamicValue::LIST: {
      // Getting the list checked its element size; only pointer elements need a walk.
      const auto list = value.as<capnp::DynamicList>();
      switch (list.getSchema().whichElementType()) {
        case capnp::schema::Type::STRUCT:
          // Zero-sized structs cost no bytes: they alone are counted against the budget.
          // Every other element is at least a word the traversal limit already charged,
          // so a list of thousands of workers walks in proportion to its bytes.
          if (list.size() > 0 && occupies_no_words(list)) {
            KJ_REQUIRE(list.size() <= budget, "more zero-sized elements than limits::max_list_elements", list.size());
            budget -= list.size();
          }
          for (auto element : list) read_every_field(element, budget);
          break;
        case capnp::schema::Type::LIST:
        case capnp::schema::Type::TEXT:
        case capnp::schema::Type::DATA:
          for (auto element : list) read_every_field(element, budget);
          break;
        default: break;
      }
      break;
    }
    case capnp::DynamicValue::TEXT: (void)value.as<capnp::Text>(); break;
    case capnp::DynamicValue::DATA: (void)value.as<capnp::Data>(); break;
    default: break;  // numbers, enums, void: nothing to check
  }
}

}  // namespace

expected<message_ptr> decode(frames&& in, const limits& lim, std::string peer_key) {
  if (in.empty()) return make_error(errc::malformed_frame, "no frames");
  if (in.size() - 1 > lim.max_tensors) return make_error(errc::too_many_frames, std::to_string(in.size()) + " frames");
  const bytes& head = in[0];
  if (head.size() > lim.max_envelope_bytes)
    return make_error(errc::frame_too_large, "envelope of " + std::to_string(head.size()) + " bytes");
  if (head.size() == 0 || head.size() % sizeof(capnp::word) != 0)
    return make_error(errc::malformed_frame,
                      "envelope size " + std::to_string(head.size()) + " is not a positive multiple of 8");
  auto msg = std::make_shared<message>();
  std::size_t total = 0;
  for (auto& f : in) total += f.size();
  msg->wire_bytes_ = total;
  msg->decoded_at_ = std::chrono::steady_clock::now();
  msg->peer_key_ = std::move(peer_key);
  // Copy into word-aligned memory: Cap'n Proto 0.9 reads aligned buffers only.
  msg->words_ = kj::heapArray<capnp::word>(head.size() / sizeof(capnp::word));
  std::memcpy(msg->words_.begin(), head.data(), head.size());
  capnp::ReaderOptions options;
  options.traversalLimitInWords = lim.traversal_limit_words;
  options.nestingLimit = lim.nesting_limit;
  try {
    msg->reader_ = std::make_unique<capnp::FlatArrayMessageReader>(msg->words_.asPtr(), options);
    msg->root_ = msg->reader_->getRoot<schema::Envelope>();
    // Validation is lazy in Cap'n Proto: walk the whole message now, inside the try;
    // first its pointers (bounds, nesting, traversal limit), then every typed field.
    (void)msg->root_.totalSize();
    if (msg->root_.getVersion() != protocol_version)
      return make_error(errc::version_mismatch, "protocol version " + std::to_string(msg->root_.getVersion()) +
                                                    ", expected " + std::to_string(protocol_version));
    if (msg->root_.getTensors().size() != in.size() - 1)
      return make_error(errc::too_many_frames, std::to_string(msg->root_.getTensors().size()) + " descriptors for " +
                                                   std::to_string(in.size() - 1) + " tensor frames");
    std::size_t list_budget = lim.max_list_elements;
    read_every_field(capnp::DynamicStruct::Reader(msg->root_), list_budget);
    // Validation spent its reader's budget; the handler gets a fresh reader over the same
    // words, with a budget of its own (limits::handler_traversal_limit_words). Without it a
    // valid envelope near the cap failed in its handler, outside this try (the head died
    // at a thousand nodes, issue 67).
    options.traversalLimitInWords = lim.handler_traversal_limit_words;
    msg->reader_ = std::make_unique<capnp::FlatArrayMessageReader>(msg->words_.asPtr(), options);
    msg->root_ = msg->reader_->getRoot<schema::Envelope>();
    msg->sender_ = msg->root_.getSender();
    msg->receiver_ = msg->root_.getReceiver();
    msg->cluster_id_ = msg->root_.getClusterId();
    msg->epoch_ = msg->root_.getEpoch();
    msg->seq_ = msg->root_.getSeq();
    (void)msg->root_.which();
    auto descs = msg->root_.getTensors();
    for (unsigned i = 0; i < descs.size(); ++i) {
      auto st = check_tensor(descs[i], in[i + 1], lim);
      if (st) return st;
      tensor t;
      t.dtype = descs[i].getDtype();
      for (auto d : descs[i].getShape()) t.shape.push_back(d);
      t.data = std::move(in[i + 1]);
      t.checksum = descs[i].getChecksum();  // check_tensor compared it with the bytes
      msg->tensors_.push_back(std::move(t));
    }
  } catch (const kj::Exception& e) {
    return make_error(errc::malformed_frame, e.getDescription().cStr());
  }
  return message_ptr{std::move(msg)};
}

status check_cluster(const message& msg, const std::string& ours) {
  const auto kind = msg.kind();
  const bool bootstrap = kind == schema::Envelope::HELLO || kind == schema::Envelope::CONTROL_REQUEST;
  if (msg.cluster_id() == ours) return {};
  if (bootstrap && msg.cluster_id().empty()) return {};
  if (ours.empty() && (kind == schema::Envelope::WELCOME || kind == schema::Envelope::REFUSAL)) return {};
  return make_error(errc::cluster_mismatch, "cluster id '" + msg.cluster_id() + "', expected '" + ours + "'");
}

const char* kind_name(schema::Envelope::Which kind) {
  using E = schema::Envelope;
  switch (kind) {
    case E::HELLO: return "hello";
    case E::WELCOME: return "welcome";
    case E::HEARTBEAT: return "heartbeat";
    case E::OBSOLETE_HEARTBEAT_ACK: return "obsolete_heartbeat_ack";
    case E::STATE_REQUEST: return "state_request";
    case E::FRAGMENT_STATE: return "fragment_state";
    case E::CONTRIBUTION: return "contribution";
    case E::ROUND_RESULT: return "round_result";
    case E::ROUND_ACK: return "round_ack";
    case E::PROGRESS: return "progress";
    case E::EVAL_REPORT: return "eval_report";
    case E::WORKER_DONE: return "worker_done";
    case E::REFUSAL: return "refusal";
    case E::CONTROL_REQUEST: return "control_request";
    case E::CONTROL_REPLY: return "control_reply";
    case E::SHUTDOWN: return "shutdown";
    case E::COMMIT_REQUEST: return "commit_request";
    case E::COMMIT_ACK: return "commit_ack";
    case E::LOAD_REQUEST: return "load_request";
    case E::LOAD_REPLY: return "load_reply";
    case E::PLACE_COORDINATOR: return "place_coordinator";
    case E::MEMBERSHIP: return "membership";
    case E::MEMBERSHIP_REQUEST: return "membership_request";
    case E::ROUND_REPORT: return "round_report";
    case E::ROUND_PROGRESS: return "round_progress";
    case E::GOODBYE: return "goodbye";
    case E::PLACE_KEEPER: return "place_keeper";
    case E::CHUNK_REQUEST: return "chunk_request";
    case E::CHUNK_REPLY: return "chunk_reply";
    case E::PEER_TABLE: return "peer_table";
    case E::STATE_HELD: return "state_held";
    case E::LEAVE_REQUEST: return "leave_request";
    case E::KEEPER_READY: return "keeper_ready";
    case E::HEARTBEAT_REQUEST: return "heartbeat_request";
    case E::INNER_STATE_REQUEST: return "inner_state_request";
    case E::INNER_STATE_REPLY: return "inner_state_reply";
    case E::PEER_TABLE_REQUEST: return "peer_table_request";
    case E::DATA_LEASE_REQUEST: return "data_lease_request";
    case E::DATA_LEASE: return "data_lease";
    case E::DATA_TIE: return "data_tie";
    case E::ROUND_REPORT_ACK: return "round_report_ack";
    case E::DROP_KEEPER: return "drop_keeper";
  }
  return "unknown";
}

}  // namespace atl::wire
