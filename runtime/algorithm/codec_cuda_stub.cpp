// Built when nvcc is absent: no CUDA codecs in this build.
#include "runtime/algorithm/codec_cuda.hpp"

namespace atl {

bool cuda_codecs_available() { return false; }
status encode_cuda(codec_kind, const float*, std::size_t, std::size_t, encoded_values&) {
  return make_error(errc::not_ready, "this build has no CUDA codecs (nvcc was not found)");
}
status decode_cuda(const encoded_values&, float*) {
  return make_error(errc::not_ready, "this build has no CUDA codecs (nvcc was not found)");
}

}  // namespace atl
