// CUDA codecs: one thread block per chunk for the scaled formats (a shared-memory max
// reduction, then quantization) and the sparse ones (a rank per value), one thread per
// value for the others. Every kernel also
// raises a device flag when it meets a non-finite value, so the refusal needs no second
// pass. Rounding is spelled out (__fsub_rn, __fadd_rn, __fmul_rn) wherever nvcc could
// otherwise contract into a fused multiply-add: the bytes must equal the CPU's.
#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "runtime/algorithm/codec_scalar.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/algorithm/parallel_ranges.hpp"
#include "runtime/device/codec_cuda.hpp"

namespace atl {
namespace {

using namespace codec_scalar;
constexpr int block_threads = 256;

__device__ inline void flag_if_not_finite(float v, int* bad) {
  if (!isfinite(v)) *bad = 1;  // benign race: every writer writes 1
}

__global__ void encode_scaled(const float* x, std::size_t n, std::size_t chunk, bool fp4, float* scales,
                              std::uint8_t* out, int* bad) {
  __shared__ float partial[block_threads];
  const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * chunk;
  const std::size_t end = begin + chunk < n ? begin + chunk : n;
  float m = 0.0f;
  for (std::size_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    flag_if_not_finite(x[i], bad);
    m = fmaxf(m, fabsf(x[i]));
  }
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

// One block per chunk of at most max_sparse_chunk values, one value a thread. A value is
// kept when fewer than k values of its chunk rank above it (a larger magnitude, or an
// equal one at a lower index: the host's order); its place among the kept is the number
// kept before it, so positions come out in increasing order as on the host. O(chunk) per
// thread: 256 compares, cheap next to the copy of the codes to the host.
__global__ void encode_sparse(const float* x, std::size_t n, std::size_t chunk, std::size_t k, float* scales,
                              std::uint8_t* out, int* bad) {
  __shared__ float magnitude[max_sparse_chunk];
  __shared__ std::uint8_t kept_flag[max_sparse_chunk];
  __shared__ std::uint8_t code[max_sparse_chunk];
  __shared__ float largest;
  const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * chunk;
  const unsigned m = static_cast<unsigned>(chunk < n - begin ? chunk : n - begin);
  const unsigned kept = static_cast<unsigned>(k < m ? k : m);
  const unsigned t = threadIdx.x;
  float v = 0.0f;
  if (t < m) {
    v = x[begin + t];
    flag_if_not_finite(v, bad);  // with a NaN the ranks are meaningless, and the call refuses
    magnitude[t] = fabsf(v);
  }
  __syncthreads();
  bool keep = false;
  if (t < m) {
    const float a = magnitude[t];
    unsigned above = 0;
    for (unsigned j = 0; j < m; ++j) above += magnitude[j] > a || (magnitude[j] == a && j < t);
    keep = above < kept;
    if (above == 0) largest = a;  // exactly one value ranks first
  }
  kept_flag[t] = keep;
  __syncthreads();
  const float scale = sparse_scale(largest);
  if (t == 0) scales[blockIdx.x] = scale;
  std::uint8_t* positions = out + static_cast<std::size_t>(blockIdx.x) * sparse_chunk_bytes(k);
  if (keep) {
    unsigned place = 0;
    for (unsigned j = 0; j < t; ++j) place += kept_flag[j];
    positions[place] = static_cast<std::uint8_t>(t);
    code[place] = to_sparse_code(v, inverse(scale));
  }
  __syncthreads();
  const unsigned pair = 2 * t;
  if (pair < kept)
    positions[kept + t] = static_cast<std::uint8_t>(code[pair] | (pair + 1 < kept ? code[pair + 1] << 4 : 0));
}

// Writes a sparse chunk's kept values into `out`, which holds zeros (one block per chunk).
// The positions were checked on the host (check_encoded) or made by encode_sparse.
__global__ void decode_sparse(const std::uint8_t* p, std::size_t n, std::size_t chunk, std::size_t k,
                              const float* scales, float* out) {
  const std::size_t begin = static_cast<std::size_t>(blockIdx.x) * chunk;
  const std::size_t m = chunk < n - begin ? chunk : n - begin;
  const unsigned kept = static_cast<unsigned>(k < m ? k : m);
  const unsigned t = threadIdx.x;
  if (t >= kept) return;
  const std::uint8_t* positions = p + static_cast<std::size_t>(blockIdx.x) * sparse_chunk_bytes(k);
  const std::uint8_t c = (positions[kept + t / 2] >> (4 * (t % 2))) & 0x0F;
  out[begin + positions[t]] = __fmul_rn(from_sparse_code(c), scales[blockIdx.x]);
}

__global__ void encode_half(const float* x, std::size_t n, bool bf16, std::uint8_t* out, int* bad) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  flag_if_not_finite(x[i], bad);
  const std::uint16_t h = bf16 ? to_bf16(x[i]) : to_fp16(x[i]);
  out[2 * i] = static_cast<std::uint8_t>(h);
  out[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
}

__global__ void check_finite(const float* x, std::size_t n, int* bad) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) flag_if_not_finite(x[i], bad);
}

// fp32 is not handled here: its codes are the values (a copy).
__global__ void decode_values(const std::uint8_t* p, std::size_t n, int kind, std::size_t chunk, const float* scales,
                              float* out) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  switch (static_cast<codec_kind>(kind)) {
    case codec_kind::fp32: break;
    case codec_kind::bf16: out[i] = from_bf16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8))); break;
    case codec_kind::fp16: out[i] = from_fp16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8))); break;
    case codec_kind::int8:
      out[i] = __fmul_rn(static_cast<float>(static_cast<std::int8_t>(p[i])), scales[i / chunk]);
      break;
    case codec_kind::fp4: {
      const std::uint8_t code = i % 2 == 0 ? (p[i / 2] & 0x0F) : (p[i / 2] >> 4);
      out[i] = __fmul_rn(from_fp4(code), scales[i / chunk]);
      break;
    }
    default: break;  // the sparse codecs: decode_sparse
  }
}

// target = (global - local) [+ residual], rounded as the host's two separate operations.
__global__ void pseudo_gradient(const float* global, const float* local, const float* residual, std::size_t n,
                                float* target) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float delta = __fsub_rn(global[i], local[i]);
  target[i] = residual ? __fadd_rn(delta, residual[i]) : delta;
}

__global__ void new_residual(const float* target, const float* sent, std::size_t n, float* residual) {
  const std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) residual[i] = __fsub_rn(target[i], sent[i]);
}

status cuda_error(const char* what, cudaError_t e) {
  return make_error(errc::not_ready, std::string(what) + ": " + cudaGetErrorString(e));
}

// Between pinned and pageable host memory, on several threads for large payloads: one
// thread's memcpy (about 10 GB/s) took most of an encode's time, several times the copy
// over PCIe (tools/bench/codec_cuda_bench.cu, "codes to host alone").
void copy_bytes(void* to, const void* from, std::size_t n) {
  parallel_ranges(n, std::size_t{1} << 16, [&](std::size_t begin, std::size_t end) {
    std::memcpy(static_cast<char*>(to) + begin, static_cast<const char*>(from) + begin, end - begin);
  });
}

unsigned blocks_for(std::size_t n) { return static_cast<unsigned>((n + block_threads - 1) / block_threads); }
static_assert(max_sparse_chunk <= block_threads, "encode_sparse holds a chunk in one block, a value a thread");

// Decodes device codes into `count` device values: one thread a value, or for the sparse
// codecs zeros and then one block a chunk.
cudaError_t launch_decode(codec_kind kind, const std::uint8_t* payload, std::size_t count, std::size_t chunk,
                          const float* scales, float* values, cudaStream_t stream) {
  if (!is_sparse(kind)) {
    decode_values<<<blocks_for(count), block_threads, 0, stream>>>(payload, count, static_cast<int>(kind), chunk,
                                                                   scales, values);
    return cudaGetLastError();
  }
  if (cudaError_t e = cudaMemsetAsync(values, 0, count * sizeof(float), stream)) return e;
  decode_sparse<<<static_cast<unsigned>(scale_count(kind, count, chunk)), block_threads, 0, stream>>>(
      payload, count, chunk, kept_per_chunk(kind, chunk), scales, values);
  return cudaGetLastError();
}

// A buffer that grows and is released on every path out: device memory or pinned host memory.
template <bool pinned>
struct grow_buffer {
  void* ptr = nullptr;
  std::size_t bytes = 0;
  cudaError_t reserve(std::size_t want) {
    if (want <= bytes) return cudaSuccess;
    release();
    const cudaError_t e = pinned ? cudaMallocHost(&ptr, want) : cudaMalloc(&ptr, want);
    if (e != cudaSuccess) {
      ptr = nullptr;
      return e;
    }
    bytes = want;
    return cudaSuccess;
  }
  void release() {
    if (ptr) pinned ? cudaFreeHost(ptr) : cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  ~grow_buffer() { release(); }
  template <class T>
  T* as() const {
    return static_cast<T*>(ptr);
  }
};

}  // namespace

struct device_codec::impl {
  int device = 0;
  grow_buffer<false> target, sent, payload, scales, flag;  // device
  grow_buffer<true> host_payload, host_scales, host_flag;  // pinned host

  // Encodes `values` (device) into the device payload/scales and copies the codes to `out`.
  status encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, cudaStream_t stream,
                encoded_values& out) {
    if (has_scales(kind) && (chunk == 0 || (kind == codec_kind::fp4 && chunk % 2 != 0)))
      return make_error(errc::invalid_config, "codec chunk must be positive (and even for fp4)");
    if (is_sparse(kind) && chunk > max_sparse_chunk)
      return make_error(errc::invalid_config,
                        std::string(to_string(kind)) + " chunk must be at most " + std::to_string(max_sparse_chunk));
    out.kind = kind;
    out.count = count;
    out.chunk = has_scales(kind) ? chunk : 0;
    const std::size_t payload_size = payload_bytes(kind, count, chunk);
    const std::size_t scale_bytes = scale_count(kind, count, chunk) * sizeof(float);
    cudaError_t e;
    if ((e = payload.reserve(payload_size)) || (e = scales.reserve(scale_bytes)) || (e = flag.reserve(sizeof(int))) ||
        (e = host_payload.reserve(payload_size)) || (e = host_scales.reserve(scale_bytes)) ||
        (e = host_flag.reserve(sizeof(int))))
      return cuda_error("allocating codec buffers", e);
    if ((e = cudaMemsetAsync(flag.ptr, 0, sizeof(int), stream))) return cuda_error("cudaMemsetAsync", e);
    if (count > 0) {
      int* bad = flag.as<int>();
      if (is_sparse(kind))
        encode_sparse<<<static_cast<unsigned>(scale_bytes / sizeof(float)), block_threads, 0, stream>>>(
            values, count, chunk, kept_per_chunk(kind, chunk), scales.as<float>(), payload.as<std::uint8_t>(), bad);
      else if (has_scales(kind))
        encode_scaled<<<static_cast<unsigned>(scale_bytes / sizeof(float)), block_threads, 0, stream>>>(
            values, count, chunk, kind == codec_kind::fp4, scales.as<float>(), payload.as<std::uint8_t>(), bad);
      else if (kind == codec_kind::fp32)
        check_finite<<<blocks_for(count), block_threads, 0, stream>>>(values, count, bad);
      else
        encode_half<<<blocks_for(count), block_threads, 0, stream>>>(values, count, kind == codec_kind::bf16,
                                                                     payload.as<std::uint8_t>(), bad);
      if ((e = cudaGetLastError())) return cuda_error("encode kernel", e);
      // fp32's codes are the values themselves: one copy, straight from them.
      const void* codes = kind == codec_kind::fp32 ? static_cast<const void*>(values) : payload.ptr;
      if ((e = cudaMemcpyAsync(host_payload.ptr, codes, payload_size, cudaMemcpyDeviceToHost, stream)) ||
          (e = cudaMemcpyAsync(host_scales.ptr, scales.ptr, scale_bytes, cudaMemcpyDeviceToHost, stream)))
        return cuda_error("copying the codes to the host", e);
    }
    if ((e = cudaMemcpyAsync(host_flag.ptr, flag.ptr, sizeof(int), cudaMemcpyDeviceToHost, stream)) ||
        (e = cudaStreamSynchronize(stream)))
      return cuda_error("encode", e);
    if (*host_flag.as<int>() != 0) return make_error(errc::not_finite, "cannot encode NaN or infinity");
    out.payload.resize(payload_size);
    copy_bytes(out.payload.data(), host_payload.ptr, payload_size);
    out.scales.assign(host_scales.as<float>(), host_scales.as<float>() + scale_bytes / sizeof(float));
    return {};
  }
};

device_codec::device_codec(int device_ordinal) : impl_(std::make_unique<impl>()) { impl_->device = device_ordinal; }
device_codec::~device_codec() = default;

status device_codec::encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, void* stream,
                            encoded_values& out) {
  if (cudaError_t e = cudaSetDevice(impl_->device)) return cuda_error("cudaSetDevice", e);
  return impl_->encode(kind, values, count, chunk, static_cast<cudaStream_t>(stream), out);
}

status device_codec::encode_delta(codec_kind kind, const float* global, const float* local, float* residual,
                                  std::size_t count, std::size_t chunk, void* stream_ptr, encoded_values& out) {
  auto& d = *impl_;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t e;
  if ((e = cudaSetDevice(d.device))) return cuda_error("cudaSetDevice", e);
  if ((e = d.target.reserve(count * sizeof(float)))) return cuda_error("allocating the pseudo-gradient", e);
  float* target = d.target.as<float>();
  if (count > 0) {
    pseudo_gradient<<<blocks_for(count), block_threads, 0, stream>>>(global, local, residual, count, target);
    if ((e = cudaGetLastError())) return cuda_error("pseudo-gradient kernel", e);
  }
  if (auto err = d.encode(kind, target, count, chunk, stream, out)) return err;  // the residual is untouched
  if (!residual || count == 0) return {};
  if (kind == codec_kind::fp32) {  // sent exactly: target - target is +0 for every finite value
    if ((e = cudaMemsetAsync(residual, 0, count * sizeof(float), stream))) return cuda_error("residual", e);
    return {};
  }
  if ((e = d.sent.reserve(count * sizeof(float)))) return cuda_error("allocating the residual scratch", e);
  if ((e = launch_decode(kind, d.payload.as<std::uint8_t>(), count, out.chunk, d.scales.as<float>(), d.sent.as<float>(),
                         stream)))
    return cuda_error("decoding what was sent", e);
  new_residual<<<blocks_for(count), block_threads, 0, stream>>>(target, d.sent.as<float>(), count, residual);
  if ((e = cudaGetLastError())) return cuda_error("residual kernels", e);
  return {};
}

status device_codec::decode(const encoded_values& in, float* values, void* stream_ptr) {
  // The CPU decoder's checks (sizes, scales, sparse positions), on the host, before any
  // byte moves.
  if (auto err = check_encoded(in)) return err;
  if (in.count == 0) return {};
  auto& d = *impl_;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  const std::size_t scale_bytes = in.scales.size() * sizeof(float);
  cudaError_t e;
  if ((e = cudaSetDevice(d.device))) return cuda_error("cudaSetDevice", e);
  if ((e = d.host_payload.reserve(in.payload.size())) || (e = d.host_scales.reserve(scale_bytes)) ||
      (e = d.payload.reserve(in.payload.size())) || (e = d.scales.reserve(scale_bytes)))
    return cuda_error("allocating codec buffers", e);
  copy_bytes(d.host_payload.ptr, in.payload.data(), in.payload.size());
  if (scale_bytes) std::memcpy(d.host_scales.ptr, in.scales.data(), scale_bytes);
  void* codes_to = in.kind == codec_kind::fp32 ? static_cast<void*>(values) : d.payload.ptr;
  if ((e = cudaMemcpyAsync(codes_to, d.host_payload.ptr, in.payload.size(), cudaMemcpyHostToDevice, stream)) ||
      (e = cudaMemcpyAsync(d.scales.ptr, d.host_scales.ptr, scale_bytes, cudaMemcpyHostToDevice, stream)))
    return cuda_error("copying the codes to the device", e);
  if (in.kind != codec_kind::fp32 && (e = launch_decode(in.kind, d.payload.as<std::uint8_t>(), in.count, in.chunk,
                                                        d.scales.as<float>(), values, stream)))
    return cuda_error("decode kernel", e);
  // The pinned buffers are reused by the next call: wait until the copies have read them.
  if ((e = cudaStreamSynchronize(stream))) return cuda_error("decode", e);
  return {};
}

bool cuda_codecs_available() { return cuda_device_count_runtime() > 0; }

int cuda_device_count_runtime() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess ? devices : 0;
}

expected<device_memory> cuda_device_memory(int ordinal) {
  const int devices = cuda_device_count_runtime();
  if (ordinal < 0 || ordinal >= devices)
    return make_error(errc::invalid_config, "no CUDA device " + std::to_string(ordinal) + " (the driver reports " +
                                                std::to_string(devices) + ")");
  int previous = 0;
  cudaGetDevice(&previous);
  device_memory m;
  cudaError_t e = cudaSetDevice(ordinal);
  if (e == cudaSuccess) e = cudaMemGetInfo(&m.free_bytes, &m.total_bytes);
  cudaSetDevice(previous);
  if (e != cudaSuccess) return cuda_error("cudaMemGetInfo", e);
  return m;
}

// Host values: staged through device buffers that live for this call only.
status encode_cuda(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out) {
  if (!all_finite(values, count)) return make_error(errc::not_finite, "cannot encode NaN or infinity");
  if (kind == codec_kind::fp32) return atl::encode(kind, values, count, chunk, out);  // a copy: no device needed
  grow_buffer<false> x;
  cudaError_t e;
  if ((e = x.reserve(count * sizeof(float)))) return cuda_error("cudaMalloc", e);
  if (count && (e = cudaMemcpy(x.ptr, values, count * sizeof(float), cudaMemcpyHostToDevice)))
    return cuda_error("copy in", e);
  return device_codec().encode(kind, x.as<float>(), count, chunk, nullptr, out);
}

status decode_cuda(const encoded_values& in, float* values) {
  if (in.kind == codec_kind::fp32) return atl::decode(in, values);  // a copy: no device needed
  grow_buffer<false> x;
  cudaError_t e;
  if ((e = x.reserve(in.count * sizeof(float)))) return cuda_error("cudaMalloc", e);
  if (auto err = device_codec().decode(in, x.as<float>(), nullptr)) return err;
  if (in.count && (e = cudaMemcpy(values, x.ptr, in.count * sizeof(float), cudaMemcpyDeviceToHost)))
    return cuda_error("copy out", e);
  return {};
}

}  // namespace atl
