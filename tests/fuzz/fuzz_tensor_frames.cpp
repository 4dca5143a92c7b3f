// Fuzzes the tensor path: a descriptor and raw frame as a peer would send them, through
// wire::decode, then the pseudo-gradient codec decoder that coordinators run on them.
//
// Input layout: dtype u8, rank u8 (<= 4), dims u16 each, byte size u16, checksum mode u8
// (even: correct checksum, odd: the next 8 bytes), codec u8, chunk u16, count u16, then
// the frame bytes. Fields are read while bytes remain; missing ones are zero.
#include <cstdint>
#include <cstring>

#include "runtime/algorithm/codec.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/transport/wire.hpp"

namespace {

struct reader {
  const std::uint8_t* p;
  std::size_t left;
  template <class T>
  T take() {
    T v{};
    const std::size_t n = left < sizeof v ? left : sizeof v;
    std::memcpy(&v, p, n);
    p += n;
    left -= n;
    return v;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace atl;
  reader in{data, size};
  wire::outgoing out;
  out.envelope.setClusterId("c");
  out.envelope.setSender("worker/1.0");
  out.envelope.setReceiver("coord/0");
  out.envelope.initContribution();
  wire::tensor t;
  t.dtype = static_cast<schema::DType>(in.take<std::uint8_t>() % 8);
  const unsigned rank = in.take<std::uint8_t>() % 5;
  for (unsigned i = 0; i < rank; ++i) t.shape.push_back(in.take<std::uint16_t>());
  const std::uint16_t declared_size = in.take<std::uint16_t>();
  const std::uint8_t checksum_mode = in.take<std::uint8_t>();
  const std::uint64_t forced_checksum = checksum_mode % 2 ? in.take<std::uint64_t>() : 0;
  const auto codec = static_cast<codec_kind>(in.take<std::uint8_t>() % 9);  // 8: unknown
  const std::uint16_t chunk = in.take<std::uint16_t>();
  const std::uint16_t count = in.take<std::uint16_t>();
  t.data.assign(in.p, in.p + in.left);
  const auto frame_copy = t.data;
  out.tensors.push_back(std::move(t));
  auto frames = wire::encode(out);
  // encode() wrote a truthful descriptor; rewrite the size and checksum as the input says.
  {
    auto words = kj::heapArray<capnp::word>(frames[0].size() / sizeof(capnp::word));
    std::memcpy(words.begin(), frames[0].data(), frames[0].size());
    capnp::FlatArrayMessageReader r(words.asPtr());
    capnp::MallocMessageBuilder b;
    b.setRoot(r.getRoot<schema::Envelope>());
    auto desc = b.getRoot<schema::Envelope>().getTensors()[0];
    if (declared_size != 0) desc.setByteSize(declared_size);
    desc.setChecksum(checksum_mode % 2 ? forced_checksum : digest64(frame_copy.data(), frame_copy.size()));
    auto flat = capnp::messageToFlatArray(b);
    frames[0].assign(flat.asBytes().begin(), flat.asBytes().end());
  }
  auto msg = wire::decode(std::move(frames), wire::limits{});
  if (!msg) return 0;
  encoded_values enc;
  enc.kind = codec;
  enc.count = count;
  enc.chunk = chunk;
  enc.payload = (*msg)->tensors()[0].data.to_vector();
  enc.scales.assign(scale_count(codec, count, chunk), 0.5f);
  std::vector<float> values(count);
  (void)decode(enc, values.data());
  return 0;
}
