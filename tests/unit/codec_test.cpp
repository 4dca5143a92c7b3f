#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "runtime/algorithm/codec.hpp"
#include "tests/support/random_values.hpp"

namespace atl {
namespace {

using testing::random_values;

std::vector<float> round_trip(codec_kind kind, const std::vector<float>& v, std::size_t chunk,
                              encoded_values* enc = nullptr) {
  encoded_values local;
  encoded_values& e = enc ? *enc : local;
  EXPECT_FALSE(encode(kind, v.data(), v.size(), chunk, e));
  std::vector<float> out(v.size(), -123.0f);
  EXPECT_FALSE(decode(e, out.data()));
  return out;
}

// The largest error a codec may make on value i (scales per chunk for int8 and fp4).
float bound(codec_kind kind, const encoded_values& e, std::size_t i, float x) {
  switch (kind) {
    case codec_kind::fp32: return 0.0f;
    case codec_kind::bf16: return std::fabs(x) * std::ldexp(1.0f, -8);  // half an ulp of 8 bits
    case codec_kind::fp16: return std::fabs(x) * std::ldexp(1.0f, -11) + std::ldexp(1.0f, -25);
    case codec_kind::int8: return e.scales[i / e.chunk] * 0.5f * 1.0001f;
    case codec_kind::fp4:
      return e.scales[i / e.chunk] * 1.0001f;  // half the 4..6 gap
    // A value not kept is at most the smallest kept one, at most the chunk's largest (7 steps).
    case codec_kind::topk16:
    case codec_kind::topk32:
    case codec_kind::topk64: return e.scales[i / e.chunk] * 7.0001f;
  }
  return 0;
}

class CodecTest : public ::testing::TestWithParam<codec_kind> {};

TEST_P(CodecTest, RoundTripStaysWithinTheFormatsErrorBound) {
  const auto kind = GetParam();
  for (std::size_t n : {1u, 2u, 7u, 255u, 256u, 257u, 1000u, 4099u}) {
    const auto v = random_values(n, static_cast<unsigned>(n), 0.01f);
    encoded_values e;
    const auto out = round_trip(kind, v, 64, &e);
    for (std::size_t i = 0; i < n; ++i)
      ASSERT_LE(std::fabs(out[i] - v[i]), bound(kind, e, i, v[i])) << to_string(kind) << " n=" << n << " i=" << i;
  }
}

TEST_P(CodecTest, ZerosAreExact) {
  std::vector<float> v(300, 0.0f);
  v[5] = -0.0f;
  v[299] = 0.25f;  // a chunk tail with one non-zero
  const auto out = round_trip(GetParam(), v, 64);
  for (std::size_t i = 0; i < 299; ++i) ASSERT_EQ(out[i], 0.0f) << i;
}

TEST_P(CodecTest, NonFiniteInputIsRefused) {
  std::vector<float> v = {1.0f, NAN, 2.0f};
  encoded_values e;
  EXPECT_EQ(encode(GetParam(), v.data(), v.size(), 64, e).code, errc::not_finite);
  v[1] = -INFINITY;
  EXPECT_EQ(encode(GetParam(), v.data(), v.size(), 64, e).code, errc::not_finite);
}

TEST_P(CodecTest, APayloadOfTheWrongSizeIsRefused) {
  const auto v = random_values(100, 3);
  encoded_values e;
  ASSERT_FALSE(encode(GetParam(), v.data(), v.size(), 64, e));
  e.payload.pop_back();
  std::vector<float> out(100);
  EXPECT_EQ(decode(e, out.data()).code, errc::tensor_mismatch);
}

TEST_P(CodecTest, ErrorFeedbackKeepsTheRunningSumWithinOneStep) {
  const auto kind = GetParam();
  const std::size_t n = 333, chunk = 64;
  error_feedback ef;
  std::vector<double> sum_in(n, 0.0), sum_out(n, 0.0);
  std::vector<float> decoded(n);
  float last_step = 0.0f;
  for (unsigned round = 0; round < 1000; ++round) {
    const auto v = random_values(n, 1000 + round, 0.01f);
    encoded_values e;
    ASSERT_FALSE(ef.encode(kind, v.data(), n, chunk, e));
    ASSERT_FALSE(decode(e, decoded.data()));
    for (std::size_t i = 0; i < n; ++i) {
      sum_in[i] += v[i];
      sum_out[i] += decoded[i];
    }
    if (!e.scales.empty()) last_step = *std::max_element(e.scales.begin(), e.scales.end());
  }
  // What was sent lags what was meant by exactly the residual (to float rounding over 1000
  // rounds: 1e-4), and for a dense codec that is under one quantization step (the scale)
  // per value, however many rounds have passed. A sparse codec's residual holds whole
  // values until they are among the largest of their chunk.
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_NEAR(sum_in[i] - sum_out[i], ef.residual()[i], 1e-4) << to_string(kind) << " i=" << i;
  if (is_sparse(kind)) return;
  const float step = kind == codec_kind::int8 || kind == codec_kind::fp4 ? 2.0f * last_step : 1e-4f;
  for (std::size_t i = 0; i < n; ++i)
    ASSERT_LE(std::fabs(sum_in[i] - sum_out[i]), step) << to_string(kind) << " i=" << i;
}

// SparseLoCo's decayed accumulator (diloco.outer = sparseloco): each round what was sent
// plus what is held equals what was accumulated, beta x held + delta; and a decay of 1 is
// plain error feedback, bit for bit.
TEST_P(CodecTest, DecayedErrorFeedbackSendsPlusHoldsWhatItAccumulated) {
  const auto kind = GetParam();
  const std::size_t n = 333, chunk = 64;
  const float beta = 0.95f;
  error_feedback decayed, plain, unit_decay;
  std::vector<float> held(n, 0.0f), sent(n);
  for (unsigned round = 0; round < 200; ++round) {
    const auto v = random_values(n, 5000 + round, 0.01f);
    encoded_values e, e_plain, e_unit;
    ASSERT_FALSE(decayed.encode(kind, v.data(), n, chunk, e, beta));
    ASSERT_FALSE(decode(e, sent.data()));
    for (std::size_t i = 0; i < n; ++i) {
      const float accumulated = beta * held[i] + v[i];
      ASSERT_NEAR(sent[i] + decayed.residual()[i], accumulated, 1e-6f * (1.0f + std::fabs(accumulated)))
          << to_string(kind) << " round " << round << " i=" << i;
    }
    held = decayed.residual();
    ASSERT_FALSE(plain.encode(kind, v.data(), n, chunk, e_plain));
    ASSERT_FALSE(unit_decay.encode(kind, v.data(), n, chunk, e_unit, 1.0f));
    ASSERT_EQ(e_plain.payload, e_unit.payload) << to_string(kind) << " round " << round;
    ASSERT_EQ(e_plain.scales, e_unit.scales) << to_string(kind) << " round " << round;
  }
  // The decay forgets: what is held stays bounded by the largest change over (1 - beta),
  // where plain error feedback of a sparse codec may hold a growing sum.
  const float bound = 5.0f * 0.01f / (1.0f - beta);
  for (std::size_t i = 0; i < n; ++i) ASSERT_LE(std::fabs(held[i]), bound) << to_string(kind) << " i=" << i;
}

INSTANTIATE_TEST_SUITE_P(AllCodecs, CodecTest,
                         ::testing::Values(codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8,
                                           codec_kind::fp4, codec_kind::topk16, codec_kind::topk32, codec_kind::topk64),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(Codec, SizesMatchTheFormats) {
  EXPECT_EQ(payload_bytes(codec_kind::fp32, 10), 40u);
  EXPECT_EQ(payload_bytes(codec_kind::bf16, 10), 20u);
  EXPECT_EQ(payload_bytes(codec_kind::int8, 10), 10u);
  EXPECT_EQ(payload_bytes(codec_kind::fp4, 11), 6u);
  EXPECT_EQ(scale_count(codec_kind::int8, 257, 256), 2u);
  EXPECT_EQ(scale_count(codec_kind::fp16, 257, 256), 0u);
  // Sparse: k = max(1, chunk / D) kept per chunk, a byte of position and a nibble each.
  EXPECT_EQ(kept_per_chunk(codec_kind::topk32, 256), 8u);
  EXPECT_EQ(kept_per_chunk(codec_kind::topk64, 32), 1u);
  EXPECT_EQ(payload_bytes(codec_kind::topk32, 1000, 256), 4u * (8 + 4));  // 3 full chunks and one of 232
  EXPECT_EQ(payload_bytes(codec_kind::topk16, 20, 64), 4u + 2);  // one chunk of 20 keeps min(4, 20)
  EXPECT_EQ(payload_bytes(codec_kind::topk16, 66, 64), (4u + 2) + (2 + 1));  // a last chunk of 2 keeps 2
  EXPECT_EQ(payload_bytes(codec_kind::topk64, 100, 64), 2u * (1 + 1));
  EXPECT_EQ(scale_count(codec_kind::topk32, 1000, 256), 4u);
}

// Of each chunk the k largest magnitudes are kept (ties to the lower index), each as
// q * scale with q in -7..7 and scale = the largest / 7; the rest decode as exact zeros.
TEST(Codec, ASparseChunkKeepsItsLargestMagnitudesTiesToTheLowerIndex) {
  std::vector<float> v(64);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.001f * static_cast<float>(i % 7);  // small
  v[3] = 2.1f;
  v[10] = -4.0f;
  v[20] = 4.0f;  // ties with 10 in magnitude: both kept
  v[30] = 1.0f;
  v[40] = 1.0f;  // ties with 30: the lower index is kept
  encoded_values e;
  const auto out = round_trip(codec_kind::topk16, v, 64, &e);  // k = 4
  ASSERT_EQ(e.payload.size(), 4u + 2);
  EXPECT_EQ(std::vector<std::uint8_t>(e.payload.begin(), e.payload.begin() + 4),
            (std::vector<std::uint8_t>{3, 10, 20, 30}));
  ASSERT_EQ(e.scales.size(), 1u);
  EXPECT_EQ(e.scales[0], 4.0f / 7.0f);
  const float s = e.scales[0];
  for (std::size_t i = 0; i < v.size(); ++i) {
    float want = 0.0f;
    if (i == 3) want = 4.0f * s;  // 2.1 / s = 3.675 -> 4
    if (i == 10) want = -7.0f * s;
    if (i == 20) want = 7.0f * s;
    if (i == 30) want = 2.0f * s;  // 1.75 -> 2
    EXPECT_EQ(out[i], want) << i;
  }
}

// Hostile sparse payloads: each refused with a typed error naming the problem, before any
// value is decoded.
TEST(Codec, MalformedSparsePayloadsAreRefused) {
  const auto v = random_values(200, 4);
  encoded_values good;
  ASSERT_FALSE(encode(codec_kind::topk16, v.data(), v.size(), 64, good));  // k = 4; chunks 64, 64, 64, 8
  struct row {
    const char* what;
    std::function<void(encoded_values&)> spoil;
    errc code;
    const char* says;
  };
  const std::vector<row> rows = {
      {"a position past its chunk", [](encoded_values& e) { e.payload[0] = 64; }, errc::tensor_mismatch,
       "out of range"},
      {"a position past a short last chunk", [](encoded_values& e) { e.payload[3 * 6] = 8; }, errc::tensor_mismatch,
       "out of range"},
      {"a duplicate position", [](encoded_values& e) { e.payload[1] = e.payload[0]; }, errc::tensor_mismatch,
       "duplicate position"},
      {"positions out of order", [](encoded_values& e) { std::swap(e.payload[0], e.payload[1]); },
       errc::tensor_mismatch, "out of order"},
      {"a negative scale", [](encoded_values& e) { e.scales[1] = -1.0f; }, errc::tensor_mismatch, "negative scale"},
      {"a non-finite scale", [](encoded_values& e) { e.scales[2] = NAN; }, errc::not_finite, "scale"},
      {"a count the payload does not hold", [](encoded_values& e) { e.count -= 7; }, errc::tensor_mismatch, "payload"},
      {"one kept value too many", [](encoded_values& e) { e.payload.push_back(0); }, errc::tensor_mismatch, "payload"},
      {"a chunk over 256", [](encoded_values& e) { e.chunk = 512; }, errc::tensor_mismatch, "chunk of 512"},
      {"no chunk", [](encoded_values& e) { e.chunk = 0; }, errc::tensor_mismatch, "chunk of 0"},
  };
  for (const auto& r : rows) {
    auto e = good;
    r.spoil(e);
    std::vector<float> out(e.count, -123.0f);
    const auto err = decode(e, out.data());
    EXPECT_EQ(err.code, r.code) << r.what << ": " << err.describe();
    EXPECT_NE(err.message.find(r.says), std::string::npos) << r.what << ": " << err.describe();
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](float x) { return x == -123.0f; })) << r.what;
  }
  encoded_values e;
  EXPECT_EQ(encode(codec_kind::topk32, v.data(), v.size(), 512, e).code, errc::invalid_config);
}

TEST(Codec, Fp4HitsItsGridExactly) {
  // With max 6 in the chunk, the scale is 1 and every e2m1 value encodes exactly.
  std::vector<float> v = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.5f, -1, -1.5f, -2, -3, -4, -6, 6};
  EXPECT_EQ(round_trip(codec_kind::fp4, v, 16), v);
}

// Each chunk's scale is its largest |x| mapped to the format's largest code, and every
// decoded value is its code times its chunk's scale, bit for bit, whatever the split into
// chunks and threads: workers, keepers and the coordinator must agree exactly.
TEST(Codec, ScaledDecodeIsEachCodeTimesItsChunksScaleBitForBit) {
  const float fp4_magnitudes[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  struct row {
    codec_kind kind;
    std::size_t count, chunk;
  };
  const std::size_t large = (std::size_t{1} << 22) + 3;  // decoded by several threads, a partial last chunk
  const std::vector<row> table = {
      {codec_kind::int8, 1, 64},       {codec_kind::int8, 1000, 64},   {codec_kind::int8, 1000, 1000},
      {codec_kind::int8, large, 4096}, {codec_kind::fp4, 1, 64},       {codec_kind::fp4, 1001, 2},
      {codec_kind::fp4, 1001, 64},     {codec_kind::fp4, large, 4096},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(std::string(to_string(r.kind)) + ", " + std::to_string(r.count) + " values, chunks of " +
                 std::to_string(r.chunk));
    const auto v = random_values(r.count, 7);
    encoded_values e;
    ASSERT_FALSE(encode(r.kind, v.data(), v.size(), r.chunk, e));
    std::vector<float> out(r.count, -123.0f), want(r.count);
    ASSERT_FALSE(decode(e, out.data()));
    for (std::size_t c = 0; c < r.count; c += r.chunk) {  // the scale: the chunk's largest |x|, mapped
      float largest = 0.0f;
      for (std::size_t i = c; i < std::min(r.count, c + r.chunk); ++i) largest = std::max(largest, std::fabs(v[i]));
      ASSERT_EQ(e.scales[c / r.chunk], largest / (r.kind == codec_kind::int8 ? 127.0f : 6.0f)) << "chunk at " << c;
    }
    for (std::size_t i = 0; i < r.count; ++i) {
      const float scale = e.scales[i / r.chunk];
      if (r.kind == codec_kind::int8) {
        want[i] = static_cast<float>(static_cast<std::int8_t>(e.payload[i])) * scale;
      } else {
        const std::uint8_t code = i % 2 == 0 ? (e.payload[i / 2] & 0x0F) : (e.payload[i / 2] >> 4);
        want[i] = ((code & 8) ? -fp4_magnitudes[code & 7] : fp4_magnitudes[code & 7]) * scale;
      }
    }
    EXPECT_EQ(std::memcmp(out.data(), want.data(), r.count * sizeof(float)), 0);
  }
}

// decode_range of any range, starting and ending inside a chunk (and, for fp4, at a high
// nibble), gives exactly decode()'s values there; encode_range of chunk-aligned ranges
// writes exactly encode()'s bytes.
TEST(Codec, RangesDecodeAndEncodeTheSameBitsAsTheWholeTensor) {
  const auto v = random_values(10'001, 9);
  for (auto kind : {codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4,
                    codec_kind::topk16, codec_kind::topk64}) {
    SCOPED_TRACE(to_string(kind));
    encoded_values whole;
    ASSERT_FALSE(encode(kind, v.data(), v.size(), 64, whole));
    std::vector<float> expected(v.size());
    ASSERT_FALSE(decode(whole, expected.data()));
    for (auto [first, n] : {std::pair<std::size_t, std::size_t>{0, 10'001}, {1, 63}, {63, 2}, {65, 1000}, {9'999, 2}}) {
      std::vector<float> part(n);
      decode_range(whole, first, n, part.data());
      EXPECT_EQ(0, std::memcmp(part.data(), expected.data() + first, n * sizeof(float))) << first << "+" << n;
    }
    encoded_values pieces;
    ASSERT_FALSE(shape_encoded(kind, v.size(), 64, pieces));
    for (std::size_t first = 0; first < v.size(); first += 640)
      encode_range(v.data() + first, first, std::min<std::size_t>(640, v.size() - first), pieces);
    EXPECT_EQ(pieces.payload, whole.payload);
    EXPECT_EQ(pieces.scales, whole.scales);
  }
}

TEST(Codec, Fp16SaturatesAndKeepsSubnormals) {
  std::vector<float> v = {1e6f, -1e6f, 6e-8f, 1.0f / 3.0f};
  const auto out = round_trip(codec_kind::fp16, v, 0);
  EXPECT_EQ(out[0], 65504.0f);
  EXPECT_EQ(out[1], -65504.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));
  EXPECT_NEAR(out[3], 1.0f / 3.0f, 1e-4f);
}

TEST(Codec, NamesParse) {
  EXPECT_EQ(*parse_codec("int8"), codec_kind::int8);
  EXPECT_EQ(*parse_codec("topk32"), codec_kind::topk32);
  EXPECT_EQ(parse_codec("topk8").err().code, errc::invalid_config);
  EXPECT_EQ(parse_codec("int4").err().code, errc::invalid_config);
}

}  // namespace
}  // namespace atl

#include "runtime/device/codec_cuda.hpp"

namespace atl {
namespace {

TEST(CudaCodec, ProducesTheSameBytesAsTheCpu) {
  if (!cuda_codecs_available()) GTEST_SKIP() << "no CUDA device (or no CUDA in this build)";
  for (auto kind : {codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4, codec_kind::topk16,
                    codec_kind::topk32, codec_kind::topk64})
    for (std::size_t n : {1u, 255u, 256u, 4099u, 1000003u}) {
      auto v = random_values(n, static_cast<unsigned>(n) + 7, 0.02f);
      if (n > 10) v[3] = 0.0f, v[9] = 1e-30f;
      encoded_values cpu, gpu;
      ASSERT_FALSE(encode(kind, v.data(), n, 256, cpu));
      ASSERT_FALSE(encode_cuda(kind, v.data(), n, 256, gpu)) << to_string(kind);
      ASSERT_EQ(cpu.payload, gpu.payload) << to_string(kind) << " n=" << n;
      ASSERT_EQ(cpu.scales, gpu.scales) << to_string(kind) << " n=" << n;
      std::vector<float> a(n), b(n);
      ASSERT_FALSE(decode(cpu, a.data()));
      ASSERT_FALSE(decode_cuda(gpu, b.data()));
      ASSERT_EQ(0, std::memcmp(a.data(), b.data(), n * 4)) << to_string(kind) << " n=" << n;
    }
}

TEST(CudaCodec, WithoutADeviceItSaysSo) {
  if (cuda_codecs_available()) GTEST_SKIP() << "a CUDA device is present";
  std::vector<float> v = {1.0f, 2.0f};
  encoded_values e;
  // fp32 needs no device; the others report that none is usable, never crash.
  EXPECT_FALSE(encode_cuda(codec_kind::fp32, v.data(), 2, 256, e));
  EXPECT_TRUE(encode_cuda(codec_kind::int8, v.data(), 2, 256, e));
}

}  // namespace
}  // namespace atl
