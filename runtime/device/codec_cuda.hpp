#pragma once
// CUDA versions of the codecs (runtime/device/codec_cuda.cu), built when nvcc is found;
// codec_cuda_stub.cpp otherwise, whose functions all answer errc::not_ready.
// Same contract as encode()/decode() and the same bytes for the same input: both use the
// scalar conversions of codec_scalar.hpp, and the error-feedback arithmetic below rounds
// exactly as error_feedback::encode does on the host.
//
// This header is free of CUDA and LibTorch headers: a stream is passed as `void*` (a
// cudaStream_t; nullptr is the legacy default stream, which LibTorch uses unless told
// otherwise, so work is ordered after the training step that produced the values).
#include <cstddef>
#include <memory>

#include "runtime/algorithm/codec.hpp"

namespace atl {

// True when this build has the kernels and a CUDA device answers.
bool cuda_codecs_available();
// Number of CUDA devices the driver reports (0 without CUDA in this build).
int cuda_device_count_runtime();
// Free and total bytes of device `ordinal`; a typed error if it does not exist.
struct device_memory {
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
};
expected<device_memory> cuda_device_memory(int ordinal);

// Values in host memory: copied to the device, encoded there, the codes copied back.
status encode_cuda(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out);
status decode_cuda(const encoded_values& in, float* values);

// Codecs on values that live in device memory, for a worker that trains on a GPU: only
// the encoded bytes cross PCIe, through pinned host buffers this object keeps between
// rounds. Not thread-safe: one per worker (the worker's actor owns it). Every call first
// makes `device_ordinal` the calling thread's current device.
class device_codec {
 public:
  explicit device_codec(int device_ordinal = 0);
  ~device_codec();
  device_codec(const device_codec&) = delete;
  device_codec& operator=(const device_codec&) = delete;

  // Encodes the pseudo-gradient global - local of `count` device values. With a residual
  // (device memory, `count` values, zeros at first) it is error feedback: the target is
  // (global - local) + residual, and the residual becomes target - decode(codes), as
  // error_feedback::encode computes it. Non-finite values are refused (errc::not_finite)
  // and leave the residual as it was.
  status encode_delta(codec_kind kind, const float* global, const float* local, float* residual, std::size_t count,
                      std::size_t chunk, void* stream, encoded_values& out);
  // Encodes `count` device values as they are.
  status encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, void* stream,
                encoded_values& out);
  // Decodes into `count` device values (sizes checked on the host first, as decode() does).
  status decode(const encoded_values& in, float* values, void* stream);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace atl
