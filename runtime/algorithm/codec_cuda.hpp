#pragma once
// CUDA versions of the codecs (runtime/algorithm/codec_cuda.cu), built when nvcc is found.
// Same contract as encode()/decode() and the same bytes for the same input: both use the
// scalar conversions of codec_scalar.hpp. Values are in host memory and copied to and
// from the device; a worker that keeps its parameters on the GPU can call the kernels
// directly later.
#include "runtime/algorithm/codec.hpp"

namespace atl {

// True when this build has the kernels and a CUDA device answers.
bool cuda_codecs_available();
status encode_cuda(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out);
status decode_cuda(const encoded_values& in, float* values);

}  // namespace atl
