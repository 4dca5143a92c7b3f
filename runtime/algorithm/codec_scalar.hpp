#pragma once
// Scalar conversions shared by the CPU codecs (codec.cpp) and the CUDA kernels
// (codec_cuda.cu): one definition, so both produce the same bytes for the same input.
// Only IEEE-exact operations are used (no fused multiply-add, no fast math).
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>

// round_even() relies on float sums being rounded to float (no excess precision).
static_assert(FLT_EVAL_METHOD == 0, "float arithmetic must be evaluated in float");

#ifdef __CUDACC__
#define ATOLL_HD __host__ __device__
#else
#define ATOLL_HD
#endif

namespace atl::codec_scalar {

ATOLL_HD inline std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
ATOLL_HD inline float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16: the top 16 bits, rounded to nearest even.
ATOLL_HD inline std::uint16_t to_bf16(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}
ATOLL_HD inline float from_bf16(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

// fp16 by integer arithmetic on the fp32 bits: round to nearest even, saturate at 65504,
// subnormals kept.
ATOLL_HD inline std::uint16_t to_fp16(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t a = u & 0x7FFFFFFFu;
  if (a >= 0x477FF000u) return sign | 0x7BFFu;  // >= 65520 (rounds past 65504): saturate
  if (a < 0x33000001u) return sign;  // <= 2^-25: rounds to zero
  const int exp = static_cast<int>(a >> 23) - 127;
  std::uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;  // 24 significant bits
  int shift;
  std::uint32_t base;
  if (exp < -14) {  // subnormal half: value = m * 2^-24, m < 1024
    shift = -exp - 1;  // mant * 2^(exp - 23) / 2^-24 = mant >> (-exp - 1)
    base = 0;
  } else {
    shift = 13;
    base = static_cast<std::uint32_t>(exp + 15) << 10;
    mant &= 0x7FFFFFu;  // drop the implicit bit: added back through base
  }
  const std::uint32_t half = 1u << (shift - 1);
  const std::uint32_t rest = mant & ((1u << shift) - 1u);
  std::uint32_t q = mant >> shift;
  if (rest > half || (rest == half && (q & 1u))) ++q;  // may carry into the exponent: fine
  return static_cast<std::uint16_t>(sign | (base + q));
}
ATOLL_HD inline float from_fp16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t e = (h >> 10) & 0x1Fu;
  std::uint32_t m = h & 0x3FFu;
  if (e == 0) {
    if (m == 0) return float_of(sign);
    int shift = 0;  // normalise the subnormal
    while (!(m & 0x400u)) {
      m <<= 1;
      ++shift;
    }
    return float_of(sign | (static_cast<std::uint32_t>(113 - shift) << 23) | ((m & 0x3FFu) << 13));
  }
  return float_of(sign | ((e + 112u) << 23) | (m << 13));
}

// Round to nearest, ties to even, for |x| < 2^22: adding and subtracting 1.5 * 2^23
// leaves the integer part in the mantissa under IEEE round-to-nearest-even. Two exact
// additions, so the loops vectorise (no libm call) and host and device agree.
ATOLL_HD inline float round_even(float x) {
  constexpr float magic = 12582912.0f;  // 1.5 * 2^23
  return (x + magic) - magic;  // not folded: we never build with -ffast-math
}

// int8 with a per-chunk scale: q = rint(x / scale) in [-127, 127].
ATOLL_HD inline float int8_scale(float max_abs) { return max_abs / 127.0f; }
ATOLL_HD inline float inverse(float scale) { return scale > 0.0f ? 1.0f / scale : 0.0f; }
ATOLL_HD inline std::int8_t to_int8(float x, float inv) {
  float v = x * inv;
  v = v < -127.0f ? -127.0f : (v > 127.0f ? 127.0f : v);  // clamping first keeps |v| small for round_even
  return static_cast<std::int8_t>(round_even(v));
}

// fp4 e2m1 with a per-chunk scale (max |x| maps to 6). Codes: bit 3 sign, bits 0-2 the
// magnitude index into {0, 0.5, 1, 1.5, 2, 3, 4, 6}; ties go to the even index.
ATOLL_HD inline float fp4_scale(float max_abs) { return max_abs / 6.0f; }
ATOLL_HD inline float fp4_magnitude(std::uint8_t index) {
  const float values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return values[index & 7u];
}
ATOLL_HD inline std::uint8_t to_fp4(float x, float inv) {
  float v = x * inv;
  v = v < -6.0f ? -6.0f : (v > 6.0f ? 6.0f : v);
  const float a = v < 0.0f ? -v : v;
  // The index is the number of midpoints below a; at a midpoint the tie goes to the even
  // index, hence '>' before odd indices and '>=' before even ones. Branchless.
  const int code = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
  return static_cast<std::uint8_t>(code | (v < 0.0f && code != 0 ? 8 : 0));
}
ATOLL_HD inline float from_fp4(std::uint8_t code) {
  const float m = fp4_magnitude(code);
  return (code & 8u) ? -m : m;
}

// The sparse codecs (codec.hpp): a chunk's payload is its kept positions, one byte each,
// then their 4-bit codes, two to a byte (the first in the low nibble).
ATOLL_HD inline std::size_t sparse_chunk_bytes(std::size_t kept) { return kept + (kept + 1) / 2; }

// The sparse codecs' kept values: q * scale, q in -7..7 (a two's-complement nibble), scale
// = the chunk's largest kept magnitude / 7: zero is exact (a chunk with fewer non-zeros
// than it keeps).
ATOLL_HD inline float sparse_scale(float largest_kept) { return largest_kept / 7.0f; }
ATOLL_HD inline std::uint8_t to_sparse_code(float x, float inv) {
  float v = x * inv;
  v = v < -7.0f ? -7.0f : (v > 7.0f ? 7.0f : v);
  return static_cast<std::uint8_t>(static_cast<std::int8_t>(round_even(v)) & 0x0F);
}
ATOLL_HD inline float from_sparse_code(std::uint8_t code) {
  return static_cast<float>(static_cast<std::int8_t>(code << 4) >> 4);
}

}  // namespace atl::codec_scalar
