#include "runtime/algorithm/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "runtime/algorithm/outer_optimizer.hpp"

namespace atl {
namespace {

// Tensors above this many values are encoded by several threads.
constexpr std::size_t parallel_threshold = std::size_t{1} << 22;

// Runs fn(begin, end) over [0, n) split into chunk-aligned ranges, in parallel for large n.
template <class Fn>
void parallel_chunks(std::size_t n, std::size_t chunk, Fn fn) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  if (n < parallel_threshold || hw == 1) {
    fn(std::size_t{0}, n);
    return;
  }
  const std::size_t chunks = (n + chunk - 1) / chunk;
  const std::size_t per = (chunks + hw - 1) / hw;
  std::vector<std::thread> threads;
  for (std::size_t c = 0; c < chunks; c += per)
    threads.emplace_back(fn, c * chunk, std::min(n, (c + per) * chunk));
  for (auto& t : threads) t.join();
}

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint16_t to_bf16(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint32_t rounding = 0x7FFFu + ((u >> 16) & 1u);  // nearest, ties to even
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}
float from_bf16(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t to_fp16(float f) {
  const std::uint32_t u = bits_of(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7BFFu;  // saturate at the largest finite half
  if (a < 5.9604645e-8f * 0.5f) return sign;  // below half the smallest subnormal
  int exp;
  const float m = std::frexp(a, &exp);  // a = m * 2^exp, m in [0.5, 1)
  if (exp < -13) {                       // subnormal half: units of 2^-24
    const float units = std::nearbyint(a * 16777216.0f);
    return sign | static_cast<std::uint16_t>(units);
  }
  // normal: 11 significant bits (implicit 1 + 10 mantissa bits)
  float sig = std::nearbyint(m * 2048.0f);  // in [1024, 2048]
  if (sig >= 2048.0f) {
    sig = 1024.0f;
    ++exp;
  }
  const int e = exp - 1 + 15;
  if (e >= 31) return sign | 0x7BFFu;
  return sign | static_cast<std::uint16_t>((e << 10) | (static_cast<int>(sig) - 1024));
}
float from_fp16(std::uint16_t h) {
  const float sign = (h & 0x8000u) ? -1.0f : 1.0f;
  const int e = (h >> 10) & 0x1F;
  const int m = h & 0x3FF;
  if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
  return sign * std::ldexp(static_cast<float>(m + 1024), e - 25);
}

// e2m1 magnitudes by code (bit 3 is the sign).
constexpr float fp4_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

std::uint8_t to_fp4(float x) {  // x already divided by the chunk scale, |x| <= 6
  const float a = std::fabs(x);
  std::uint8_t code = 0;
  // Nearest representable magnitude; ties go to the even code (the smaller mantissa).
  for (std::uint8_t c = 1; c < 8; ++c) {
    const float mid = 0.5f * (fp4_values[c - 1] + fp4_values[c]);
    if (a > mid || (a == mid && (c % 2 == 0))) code = c;
  }
  return static_cast<std::uint8_t>(code | (x < 0 && code != 0 ? 8u : 0u));
}
float from_fp4(std::uint8_t code) {
  const float v = fp4_values[code & 7u];
  return (code & 8u) ? -v : v;
}

float chunk_max_abs(const float* v, std::size_t n) {
  float m = 0.0f;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(v[i]));
  return m;
}

}  // namespace

expected<codec_kind> parse_codec(const std::string& name) {
  for (auto k : {codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4})
    if (name == to_string(k)) return k;
  return make_error(errc::invalid_config, "unknown codec '" + name + "' (fp32, bf16, fp16, int8, fp4)");
}

const char* to_string(codec_kind kind) {
  switch (kind) {
    case codec_kind::fp32: return "fp32";
    case codec_kind::bf16: return "bf16";
    case codec_kind::fp16: return "fp16";
    case codec_kind::int8: return "int8";
    case codec_kind::fp4: return "fp4";
  }
  return "unknown";
}

std::size_t payload_bytes(codec_kind kind, std::size_t count) {
  switch (kind) {
    case codec_kind::fp32: return count * 4;
    case codec_kind::bf16:
    case codec_kind::fp16: return count * 2;
    case codec_kind::int8: return count;
    case codec_kind::fp4: return (count + 1) / 2;
  }
  return 0;
}

std::size_t scale_count(codec_kind kind, std::size_t count, std::size_t chunk) {
  if (kind != codec_kind::int8 && kind != codec_kind::fp4) return 0;
  return chunk == 0 ? 0 : (count + chunk - 1) / chunk;
}

status encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out) {
  if (!all_finite(values, count)) return make_error(errc::not_finite, "cannot encode NaN or infinity");
  const bool scaled = kind == codec_kind::int8 || kind == codec_kind::fp4;
  if (scaled && chunk == 0) return make_error(errc::invalid_config, "codec chunk must be positive");
  if (kind == codec_kind::fp4 && chunk % 2 != 0) return make_error(errc::invalid_config, "fp4 chunk must be even");
  out.kind = kind;
  out.count = count;
  out.chunk = scaled ? chunk : 0;
  out.payload.assign(payload_bytes(kind, count), 0);
  out.scales.assign(scale_count(kind, count, chunk), 0.0f);
  std::uint8_t* p = out.payload.data();
  switch (kind) {
    case codec_kind::fp32:
      if (count) std::memcpy(p, values, count * 4);
      break;
    case codec_kind::bf16:
      for (std::size_t i = 0; i < count; ++i) {
        const auto h = to_bf16(values[i]);
        p[2 * i] = static_cast<std::uint8_t>(h);
        p[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
      }
      break;
    case codec_kind::fp16:
      for (std::size_t i = 0; i < count; ++i) {
        const auto h = to_fp16(values[i]);
        p[2 * i] = static_cast<std::uint8_t>(h);
        p[2 * i + 1] = static_cast<std::uint8_t>(h >> 8);
      }
      break;
    case codec_kind::int8:
      parallel_chunks(count, chunk, [&](std::size_t begin, std::size_t end) {
        for (std::size_t c = begin; c < end; c += chunk) {
          const std::size_t n = std::min(chunk, end - c);
          const float scale = chunk_max_abs(values + c, n) / 127.0f;
          out.scales[c / chunk] = scale;
          const float inv = scale > 0 ? 1.0f / scale : 0.0f;
          for (std::size_t i = 0; i < n; ++i) {
            const float q = std::nearbyint(values[c + i] * inv);
            p[c + i] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f)));
          }
        }
      });
      break;
    case codec_kind::fp4:
      parallel_chunks(count, chunk, [&](std::size_t begin, std::size_t end) {
        for (std::size_t c = begin; c < end; c += chunk) {
          const std::size_t n = std::min(chunk, end - c);
          const float scale = chunk_max_abs(values + c, n) / 6.0f;
          out.scales[c / chunk] = scale;
          const float inv = scale > 0 ? 1.0f / scale : 0.0f;
          for (std::size_t i = 0; i < n; ++i) {
            const std::size_t k = c + i;
            const std::uint8_t code = to_fp4(std::clamp(values[k] * inv, -6.0f, 6.0f));
            p[k / 2] |= static_cast<std::uint8_t>(k % 2 == 0 ? code : code << 4);
          }
        }
      });
      break;
  }
  return {};
}

status decode(const encoded_values& in, float* values) {
  if (in.payload.size() != payload_bytes(in.kind, in.count))
    return make_error(errc::tensor_mismatch, std::string(to_string(in.kind)) + " payload of " +
                                                 std::to_string(in.payload.size()) + " bytes for " +
                                                 std::to_string(in.count) + " values");
  const bool scaled = in.kind == codec_kind::int8 || in.kind == codec_kind::fp4;
  if (scaled && (in.chunk == 0 || in.scales.size() != scale_count(in.kind, in.count, in.chunk) ||
                 (in.kind == codec_kind::fp4 && in.chunk % 2 != 0)))
    return make_error(errc::tensor_mismatch, "scales do not match the chunking");
  if (scaled && !all_finite(in.scales.data(), in.scales.size())) return make_error(errc::not_finite, "scale");
  const std::uint8_t* p = in.payload.data();
  switch (in.kind) {
    case codec_kind::fp32:
      if (in.count) std::memcpy(values, p, in.count * 4);
      break;
    case codec_kind::bf16:
      for (std::size_t i = 0; i < in.count; ++i) values[i] = from_bf16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
    case codec_kind::fp16:
      for (std::size_t i = 0; i < in.count; ++i) values[i] = from_fp16(static_cast<std::uint16_t>(p[2 * i] | (p[2 * i + 1] << 8)));
      break;
    case codec_kind::int8:
      for (std::size_t i = 0; i < in.count; ++i)
        values[i] = static_cast<float>(static_cast<std::int8_t>(p[i])) * in.scales[i / in.chunk];
      break;
    case codec_kind::fp4:
      for (std::size_t i = 0; i < in.count; ++i) {
        const std::uint8_t code = i % 2 == 0 ? (p[i / 2] & 0x0F) : (p[i / 2] >> 4);
        values[i] = from_fp4(code) * in.scales[i / in.chunk];
      }
      break;
  }
  return {};
}

status error_feedback::encode(codec_kind kind, const float* delta, std::size_t count, std::size_t chunk,
                              encoded_values& out) {
  if (residual_.size() != count) residual_.assign(count, 0.0f);
  target_.resize(count);
  for (std::size_t i = 0; i < count; ++i) target_[i] = delta[i] + residual_[i];
  if (auto err = atl::encode(kind, target_.data(), count, chunk, out)) return err;
  sent_.resize(count);
  if (auto err = decode(out, sent_.data())) return err;
  for (std::size_t i = 0; i < count; ++i) residual_[i] = target_[i] - sent_[i];
  return {};
}

}  // namespace atl
