// Codec throughput (Google Benchmark): encode and decode of one model-sized fragment per
// codec, and the checksum every tensor frame carries (digest64), against a memcpy of the
// same fp32 bytes measured in the same run.
//   build/tools/atoll_codec_bench [--benchmark_filter=int8]
#include <cstring>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>

#include "runtime/algorithm/codec.hpp"
#include "runtime/core/digest.hpp"

namespace {

std::vector<float> values(std::size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 0.01f);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

void baseline_memcpy(benchmark::State& state) {
  const auto in = values(static_cast<std::size_t>(state.range(0)));
  std::vector<float> out(in.size());
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), in.size() * 4);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

void encode(benchmark::State& state, atl::codec_kind kind) {
  const auto in = values(static_cast<std::size_t>(state.range(0)));
  atl::encoded_values out;
  for (auto _ : state) {
    if (atl::encode(kind, in.data(), in.size(), 256, out)) state.SkipWithError("encode failed");
    benchmark::DoNotOptimize(out.payload.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);  // fp32 bytes in
}

void decode(benchmark::State& state, atl::codec_kind kind) {
  const auto in = values(static_cast<std::size_t>(state.range(0)));
  atl::encoded_values enc;
  (void)atl::encode(kind, in.data(), in.size(), 256, enc);
  std::vector<float> out(in.size());
  for (auto _ : state) {
    if (atl::decode(enc, out.data())) state.SkipWithError("decode failed");
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);  // fp32 bytes out
}

// Every frame is hashed by its sender and checked by each receiver, so a fragment is hashed
// several times a round (contributions, the commit at each keeper, the result at each worker).
void checksum(benchmark::State& state) {
  const auto in = values(static_cast<std::size_t>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(atl::digest64(in.data(), in.size() * 4));
  state.SetBytesProcessed(state.iterations() * state.range(0) * 4);
}

// 834k values: the default example's whole model; 8M: past the threading threshold.
#define ATOLL_SIZES ->Arg(834048)->Arg(8 << 20)->Unit(benchmark::kMillisecond)
BENCHMARK(baseline_memcpy) ATOLL_SIZES;
BENCHMARK(checksum) ATOLL_SIZES;
BENCHMARK_CAPTURE(encode, bf16, atl::codec_kind::bf16) ATOLL_SIZES;
BENCHMARK_CAPTURE(encode, fp16, atl::codec_kind::fp16) ATOLL_SIZES;
BENCHMARK_CAPTURE(encode, int8, atl::codec_kind::int8) ATOLL_SIZES;
BENCHMARK_CAPTURE(encode, fp4, atl::codec_kind::fp4) ATOLL_SIZES;
BENCHMARK_CAPTURE(decode, bf16, atl::codec_kind::bf16) ATOLL_SIZES;
BENCHMARK_CAPTURE(decode, fp16, atl::codec_kind::fp16) ATOLL_SIZES;
BENCHMARK_CAPTURE(decode, int8, atl::codec_kind::int8) ATOLL_SIZES;
BENCHMARK_CAPTURE(decode, fp4, atl::codec_kind::fp4) ATOLL_SIZES;

}  // namespace

BENCHMARK_MAIN();
