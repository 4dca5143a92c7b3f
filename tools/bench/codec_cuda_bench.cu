// Device codec throughput: encode (the pseudo-gradient global - local with error feedback,
// codes copied to pinned host memory: what a GPU worker pays per fragment and round) and
// decode (codes from the host, values on the device), in GB/s of fp32 values, next to a
// device-to-device copy of the same fp32 bytes and to the bound an encoder cannot beat:
// copying its codes (payload and scales) from the device to pinned host memory. Timed with CUDA events around whole calls,
// median of 20 after 3 warm-ups. Run by `./tools/dev gpu-test bench`.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include "runtime/device/codec_cuda.hpp"

namespace {

template <class Fn>
double median_ms(Fn fn) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (int i = 0; i < 3; ++i) fn();
  std::vector<double> times;
  for (int i = 0; i < 20; ++i) {
    cudaEventRecord(start);
    fn();
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  std::sort(times.begin(), times.end());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return times[times.size() / 2];
}

float* device_values(std::size_t n, unsigned seed) {
  std::vector<float> host(n);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.02f);
  for (auto& x : host) x = dist(rng);
  float* d = nullptr;
  cudaMalloc(&d, n * sizeof(float));
  cudaMemcpy(d, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  return d;
}

}  // namespace

int main() {
  using namespace atl;
  if (!cuda_codecs_available()) {
    std::fprintf(stderr, "codec_cuda_bench: no CUDA device\n");
    return 1;
  }
  std::printf(
      "| values | codec | encode+EF GB/s | codes to host alone GB/s | decode GB/s | d2d copy GB/s (read+write) | "
      "encoded bytes |\n");
  std::printf("|---|---|---|---|---|---|---|\n");
  for (std::size_t n : {std::size_t{834048}, std::size_t{21} << 20, std::size_t{86} << 20}) {
    float* global = device_values(n, 1);
    float* local = device_values(n, 2);
    float* residual = nullptr;
    float* out = nullptr;
    cudaMalloc(&residual, n * sizeof(float));
    cudaMemset(residual, 0, n * sizeof(float));
    cudaMalloc(&out, n * sizeof(float));
    const double copy_ms =
        median_ms([&] { cudaMemcpyAsync(out, global, n * sizeof(float), cudaMemcpyDeviceToDevice); });
    const double gb = static_cast<double>(n) * sizeof(float) / 1e9;
    for (auto kind : {codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4,
                      codec_kind::topk32}) {
      device_codec codec;
      encoded_values enc;
      const double enc_ms = median_ms([&] {
        if (auto err = codec.encode_delta(kind, global, local, residual, n, 256, nullptr, enc))
          std::fprintf(stderr, "encode: %s\n", err.describe().c_str());
      });
      const double dec_ms = median_ms([&] {
        if (auto err = codec.decode(enc, out, nullptr)) std::fprintf(stderr, "decode: %s\n", err.describe().c_str());
      });
      // The bound: the same number of code bytes, device to pinned host, in one copy.
      const std::size_t code_bytes = enc.payload.size() + enc.scales.size() * 4;
      void* pinned = nullptr;
      cudaMallocHost(&pinned, code_bytes);
      const double down_ms = median_ms([&] { cudaMemcpyAsync(pinned, global, code_bytes, cudaMemcpyDeviceToHost); });
      cudaFreeHost(pinned);
      std::printf("| %zu | %s | %.1f | %.1f | %.1f | %.0f | %zu |\n", n, to_string(kind), gb / (enc_ms / 1e3),
                  gb / (down_ms / 1e3), gb / (dec_ms / 1e3), 2 * gb / (copy_ms / 1e3), code_bytes);
    }
    cudaFree(global);
    cudaFree(local);
    cudaFree(residual);
    cudaFree(out);
  }
  return 0;
}
