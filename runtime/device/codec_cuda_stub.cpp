// Built when nvcc is absent: no CUDA codecs in this build. fp32 needs no device (its codes
// are the values), so the host-memory functions still answer it, as the CUDA build does.
#include "runtime/device/codec_cuda.hpp"

namespace atl {
namespace {

status no_cuda() { return make_error(errc::not_ready, "this build has no CUDA codecs (nvcc was not found)"); }

}  // namespace

bool cuda_codecs_available() { return false; }
int cuda_device_count_runtime() { return 0; }
expected<device_memory> cuda_device_memory(int) { return no_cuda(); }

status encode_cuda(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out) {
  if (kind == codec_kind::fp32) return encode(kind, values, count, chunk, out);
  return no_cuda();
}
status decode_cuda(const encoded_values& in, float* values) {
  if (in.kind == codec_kind::fp32) return decode(in, values);
  return no_cuda();
}

struct device_codec::impl {};
device_codec::device_codec(int) {}
device_codec::~device_codec() = default;
status device_codec::encode_delta(codec_kind, const float*, const float*, float*, std::size_t, std::size_t, void*,
                                  encoded_values&) {
  return no_cuda();
}
status device_codec::encode(codec_kind, const float*, std::size_t, std::size_t, void*, encoded_values&) {
  return no_cuda();
}
status device_codec::decode(const encoded_values&, float*, void*) { return no_cuda(); }

}  // namespace atl
