// CUDA codecs: one thread block per chunk for the scaled formats (a shared-memory max
// reduction, then quantization), one thread per value for the others.
#include <cuda_runtime.h>

#include <string>

#include "runtime/algorithm/codec_cuda.hpp"
#include "runtime/algorithm/codec_scalar.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"

namespace atl {
namespace {

using namespace codec_scalar;
constexpr int block_threads = 256;

__global__ void encode_scaled(const float* x, std::size_t n, std::size_t chunk, bool fp4, float* scales,
                              std::uint8_t* out) {
  __shared__ float partial[block_threads];
  const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * chunk;
  const std::size_t end = begin + chunk < n ? begin + chunk : n;
  float m = 0.0f;
  for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) m = fmaxf(m, fabsf(x[i]));
  partial[threadIdx.x] = m;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s /= 2) {
    if (threadIdx.x < s) partial[threadIdx.x] = fmaxf(partial[threadIdx.x], partial[threadIdx.x + s]);
    __syncthreads();
  }
  const float scale = fp4 ? fp4_scale(partial[0]) : int8_scale(partial[0]);
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  const float inv = inverse(scale);
  if (!fp4) {
    for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x)
      out[i] = static_cast<std::uint8_t>(to_int8(x[i], inv));
    return;
  }
  // Chunks are even, so a byte's two values never straddle chunks.
  for (std::size_t i = begin + 2 * threadIdx.x; i < end; i += 2 * blockDim.x) {
    std::uint8_t byte = to_fp4(x[i], inv);
    if (i + 1 < end) byte = static_cast<std::uint8_t>(byte | (to_fp4(x[i + 1], inv) << 4));
    out[i / 2] = byte;
  }
}

__global__ void encode_half(const float* x, std::size_t n, bool bf16, std::uint8_t* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const std::uint16_t h = bf16 ? to_bf16(x[i]) : to_fp16(x[i]);
  out[2 * i] = static_cast<std::uint8_t>(h);
  out[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
}

__global__ void decode_values(const std::uint8_t* p, std::size_t n, int kind, std::size_t chunk, const float* scales,
                              float* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (static_cast<codec_kind>(kind)) {
    case codec_kind::fp32: break;
    case codec_kind::bf16: out[i] = from_bf16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8))); break;
    case codec_kind::fp16: out[i] = from_fp16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8))); break;
    case codec_kind::int8: out[i] = static_cast<float>(static_cast<std::int8_t>(p[i])) * scales[i / chunk]; break;
    case codec_kind::fp4: {
      const std::uint8_t code = i % 2 == 0 ? (p[i / 2] & 0x0F) : (p[i / 2] >> 4);
      out[i] = from_fp4(code) * scales[i / chunk];
      break;
    }
  }
}

// Device buffers released on every path out.
struct device_buffer {
  void* ptr = nullptr;
  cudaError_t alloc(std::size_t bytes) { return bytes ? cudaMalloc(&ptr, bytes) : cudaSuccess; }
  ~device_buffer() {
    if (ptr) cudaFree(ptr);
  }
};

status cuda_error(const char* what, cudaError_t e) {
  return make_error(errc::not_ready, std::string(what) + ": " + cudaGetErrorString(e));
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + block_threads - 1) / block_threads); }

}  // namespace

bool cuda_codecs_available() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

status encode_cuda(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out) {
  if (!all_finite(values, count)) return make_error(errc::not_finite, "cannot encode NaN or infinity");
  const bool scaled = kind == codec_kind::int8 || kind == codec_kind::fp4;
  if (scaled && (chunk == 0 || (kind == codec_kind::fp4 && chunk % 2 != 0)))
    return make_error(errc::invalid_config, "codec chunk must be positive (and even for fp4)");
  out.kind = kind;
  out.count = count;
  out.chunk = scaled ? chunk : 0;
  out.payload.assign(payload_bytes(kind, count), 0);
  out.scales.assign(scale_count(kind, count, chunk), 0.0f);
  if (kind == codec_kind::fp32 || count == 0) {
    if (count) std::memcpy(out.payload.data(), values, count * 4);
    return {};
  }
  device_buffer x, payload, scales;
  cudaError_t e;
  if ((e = x.alloc(count * 4)) || (e = payload.alloc(out.payload.size())) || (e = scales.alloc(out.scales.size() * 4)))
    return cuda_error("cudaMalloc", e);
  if ((e = cudaMemcpy(x.ptr, values, count * 4, cudaMemcpyHostToDevice))) return cuda_error("copy in", e);
  const auto* dx = static_cast<const float*>(x.ptr);
  auto* dp = static_cast<std::uint8_t*>(payload.ptr);
  if (scaled)
    encode_scaled<<<static_cast<unsigned>(out.scales.size()), block_threads>>>(
        dx, count, chunk, kind == codec_kind::fp4, static_cast<float*>(scales.ptr), dp);
  else
    encode_half<<<blocks_for(count), block_threads>>>(dx, count, kind == codec_kind::bf16, dp);
  if ((e = cudaGetLastError())) return cuda_error("encode kernel", e);
  if ((e = cudaMemcpy(out.payload.data(), dp, out.payload.size(), cudaMemcpyDeviceToHost))) return cuda_error("copy out", e);
  if (scaled && (e = cudaMemcpy(out.scales.data(), scales.ptr, out.scales.size() * 4, cudaMemcpyDeviceToHost)))
    return cuda_error("copy scales", e);
  return {};
}

status decode_cuda(const encoded_values& in, float* values) {
  // The same size checks as the CPU decoder, on the host.
  if (in.payload.size() != payload_bytes(in.kind, in.count)) return make_error(errc::tensor_mismatch, "payload size");
  const bool scaled = in.kind == codec_kind::int8 || in.kind == codec_kind::fp4;
  if (scaled && (in.chunk == 0 || in.scales.size() != scale_count(in.kind, in.count, in.chunk)))
    return make_error(errc::tensor_mismatch, "scales do not match the chunking");
  if (in.kind == codec_kind::fp32 || in.count == 0) {
    if (in.count) std::memcpy(values, in.payload.data(), in.count * 4);
    return {};
  }
  device_buffer payload, scales, out;
  cudaError_t e;
  if ((e = payload.alloc(in.payload.size())) || (e = scales.alloc(in.scales.size() * 4)) || (e = out.alloc(in.count * 4)))
    return cuda_error("cudaMalloc", e);
  if ((e = cudaMemcpy(payload.ptr, in.payload.data(), in.payload.size(), cudaMemcpyHostToDevice))) return cuda_error("copy in", e);
  if (scaled && (e = cudaMemcpy(scales.ptr, in.scales.data(), in.scales.size() * 4, cudaMemcpyHostToDevice)))
    return cuda_error("copy scales", e);
  decode_values<<<blocks_for(in.count), block_threads>>>(static_cast<const std::uint8_t*>(payload.ptr), in.count,
                                                         static_cast<int>(in.kind), in.chunk,
                                                         static_cast<const float*>(scales.ptr), static_cast<float*>(out.ptr));
  if ((e = cudaGetLastError())) return cuda_error("decode kernel", e);
  if ((e = cudaMemcpy(values, out.ptr, in.count * 4, cudaMemcpyDeviceToHost))) return cuda_error("copy out", e);
  return {};
}

}  // namespace atl
