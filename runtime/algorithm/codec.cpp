#include "runtime/algorithm/codec.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "runtime/algorithm/codec_scalar.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/algorithm/parallel_ranges.hpp"

namespace atl {
namespace {

// How the codecs without scales (fp32, bf16, fp16) split a tensor between threads.
constexpr std::size_t unscaled_step = std::size_t{1} << 16;

using namespace codec_scalar;

// Sixteen running maxima, so the loop vectorises (one running maximum is a dependency
// chain GCC will not reorder without -ffast-math). encode() refused NaN first, and the
// maximum of finite values is the same in any order.
float chunk_max_abs(const float* v, std::size_t n) {
  constexpr std::size_t lanes = 16;
  float lane[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t k = 0; k < lanes; ++k) {
      const float a = std::fabs(v[i + k]);
      lane[k] = lane[k] < a ? a : lane[k];
    }
  float m = 0.0f;
  for (; i < n; ++i) m = std::max(m, std::fabs(v[i]));
  for (float l : lane) m = std::max(m, l);
  return m;
}

// Chunk `index` of a sparse tensor (every chunk before the last is full).
struct sparse_chunk {
  std::size_t start, length, kept, offset;  // values [start, start + length); payload offset
};
sparse_chunk sparse_chunk_at(codec_kind kind, std::size_t count, std::size_t chunk, std::size_t index) {
  const std::size_t k = kept_per_chunk(kind, chunk);
  const std::size_t start = index * chunk, length = std::min(chunk, count - start);
  return {start, length, std::min(k, length), index * sparse_chunk_bytes(k)};
}

// Keeps the k largest magnitudes of v[0, m) (ties to the lower index), in position order.
void encode_sparse_chunk(const float* v, std::size_t m, std::size_t kept, std::uint8_t* out, float& scale) {
  std::uint8_t order[max_sparse_chunk];
  for (std::size_t i = 0; i < m; ++i) order[i] = static_cast<std::uint8_t>(i);
  std::partial_sort(order, order + kept, order + m, [v](std::uint8_t a, std::uint8_t b) {
    const float fa = std::fabs(v[a]), fb = std::fabs(v[b]);
    return fa > fb || (fa == fb && a < b);
  });
  std::sort(order, order + kept);
  float largest = 0.0f;
  for (std::size_t t = 0; t < kept; ++t) largest = std::max(largest, std::fabs(v[order[t]]));
  scale = sparse_scale(largest);
  const float inv = inverse(scale);
  std::uint8_t* codes = out + kept;
  std::fill(codes, codes + (kept + 1) / 2, std::uint8_t{0});
  for (std::size_t t = 0; t < kept; ++t) {
    out[t] = order[t];
    codes[t / 2] |= static_cast<std::uint8_t>(to_sparse_code(v[order[t]], inv) << (4 * (t % 2)));
  }
}

}  // namespace

expected<codec_kind> parse_codec(const std::string& name) {
  for (auto k : {codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4,
                 codec_kind::topk16, codec_kind::topk32, codec_kind::topk64})
    if (name == to_string(k)) return k;
  return make_error(errc::invalid_config,
                    "unknown codec '" + name + "' (fp32, bf16, fp16, int8, fp4, topk16, topk32, topk64)");
}

std::size_t kept_per_chunk(codec_kind kind, std::size_t chunk) {
  std::size_t divisor = 0;
  switch (kind) {
    case codec_kind::topk16: divisor = 16; break;
    case codec_kind::topk32: divisor = 32; break;
    case codec_kind::topk64: divisor = 64; break;
    default: return 0;
  }
  return std::max<std::size_t>(1, chunk / divisor);
}

const char* to_string(codec_kind kind) {
  switch (kind) {
    case codec_kind::fp32: return "fp32";
    case codec_kind::bf16: return "bf16";
    case codec_kind::fp16: return "fp16";
    case codec_kind::int8: return "int8";
    case codec_kind::fp4: return "fp4";
    case codec_kind::topk16: return "topk16";
    case codec_kind::topk32: return "topk32";
    case codec_kind::topk64: return "topk64";
  }
  return "unknown";
}

std::size_t payload_bytes(codec_kind kind, std::size_t count, std::size_t chunk) {
  if (is_sparse(kind)) {
    if (chunk == 0 || count == 0) return 0;
    const std::size_t chunks = (count + chunk - 1) / chunk;
    const auto last = sparse_chunk_at(kind, count, chunk, chunks - 1);
    return last.offset + sparse_chunk_bytes(last.kept);
  }
  switch (kind) {
    case codec_kind::fp32: return count * 4;
    case codec_kind::bf16:
    case codec_kind::fp16: return count * 2;
    case codec_kind::int8: return count;
    case codec_kind::fp4: return (count + 1) / 2;
    default: return 0;
  }
}

std::size_t scale_count(codec_kind kind, std::size_t count, std::size_t chunk) {
  if (!has_scales(kind)) return 0;
  return chunk == 0 ? 0 : (count + chunk - 1) / chunk;
}

status shape_encoded(codec_kind kind, std::size_t count, std::size_t chunk, encoded_values& out) {
  const bool scaled = has_scales(kind);
  if (scaled && chunk == 0) return make_error(errc::invalid_config, "codec chunk must be positive");
  if (kind == codec_kind::fp4 && chunk % 2 != 0) return make_error(errc::invalid_config, "fp4 chunk must be even");
  if (is_sparse(kind) && chunk > max_sparse_chunk)
    return make_error(errc::invalid_config, std::string(to_string(kind)) + " chunk must be at most " +
                                                std::to_string(max_sparse_chunk) + " (a position is one byte)");
  out.kind = kind;
  out.count = count;
  out.chunk = scaled ? chunk : 0;
  out.payload.assign(payload_bytes(kind, count, chunk), 0);
  out.scales.assign(scale_count(kind, count, chunk), 0.0f);
  return {};
}

void encode_range(const float* values, std::size_t first, std::size_t n, encoded_values& out) {
  std::uint8_t* p = out.payload.data();
  const std::size_t chunk = out.chunk;
  switch (out.kind) {
    case codec_kind::fp32:
      if (n) std::memcpy(p + 4 * first, values, n * 4);
      break;
    case codec_kind::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        const auto h = to_bf16(values[i]);
        p[2 * (first + i)] = static_cast<std::uint8_t>(h);
        p[2 * (first + i) + 1] = static_cast<std::uint8_t>(h >> 8);
      }
      break;
    case codec_kind::fp16:
      for (std::size_t i = 0; i < n; ++i) {
        const auto h = to_fp16(values[i]);
        p[2 * (first + i)] = static_cast<std::uint8_t>(h);
        p[2 * (first + i) + 1] = static_cast<std::uint8_t>(h >> 8);
      }
      break;
    case codec_kind::int8:
      for (std::size_t c = 0; c < n; c += chunk) {
        const std::size_t m = std::min(chunk, n - c);
        const float scale = int8_scale(chunk_max_abs(values + c, m));
        out.scales[(first + c) / chunk] = scale;
        const float inv = inverse(scale);
        // Local pointers: a store through a byte pointer may alias anything, and through
        // references GCC reloaded them at every value instead of vectorising.
        const float* in = values + c;
        std::uint8_t* q = p + first + c;
        for (std::size_t i = 0; i < m; ++i) q[i] = static_cast<std::uint8_t>(to_int8(in[i], inv));
      }
      break;
    case codec_kind::fp4:  // first and chunks are even: a chunk starts at a byte's low nibble
      for (std::size_t c = 0; c < n; c += chunk) {
        const std::size_t m = std::min(chunk, n - c);
        const float scale = fp4_scale(chunk_max_abs(values + c, m));
        out.scales[(first + c) / chunk] = scale;
        const float inv = inverse(scale);
        std::uint8_t* pairs = p + (first + c) / 2;
        for (std::size_t i = 0; i < m; ++i) {
          const std::uint8_t code = to_fp4(values[c + i], inv);
          pairs[i / 2] |= static_cast<std::uint8_t>(i % 2 == 0 ? code : code << 4);
        }
      }
      break;
    case codec_kind::topk16:
    case codec_kind::topk32:
    case codec_kind::topk64:
      for (std::size_t c = 0; c < n; c += chunk) {
        const auto at = sparse_chunk_at(out.kind, out.count, chunk, (first + c) / chunk);
        encode_sparse_chunk(values + c, at.length, at.kept, p + at.offset, out.scales[(first + c) / chunk]);
      }
      break;
  }
}

status encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out) {
  if (!all_finite(values, count)) return make_error(errc::not_finite, "cannot encode NaN or infinity");
  if (auto err = shape_encoded(kind, count, chunk, out)) return err;
  parallel_ranges(count, out.chunk ? out.chunk : unscaled_step,
                  [&](std::size_t begin, std::size_t end) { encode_range(values + begin, begin, end - begin, out); });
  return {};
}

void decode_range(const encoded_values& in, std::size_t first, std::size_t n, float* values) {
  const std::uint8_t* p = in.payload.data();
  const std::size_t chunk = in.chunk;
  switch (in.kind) {
    case codec_kind::fp32:
      if (n) std::memcpy(values, p + 4 * first, n * 4);
      break;
    case codec_kind::bf16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = first + i;
        values[i] = from_bf16(static_cast<std::uint16_t>(p[2 * k] | (p[2 * k + 1] << 8)));
      }
      break;
    case codec_kind::fp16:
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t k = first + i;
        values[i] = from_fp16(static_cast<std::uint16_t>(p[2 * k] | (p[2 * k + 1] << 8)));
      }
      break;
    // Chunk by chunk: one scale per inner loop lets it vectorise (an index division per
    // value held int8 to about 2 GB/s). Each value is still code * scale, the very product
    // a device or an older build computes. A range may start and end inside a chunk.
    case codec_kind::int8:
      for (std::size_t i = 0; i < n;) {
        const std::size_t k = first + i;
        const std::size_t m = std::min(n - i, (k / chunk + 1) * chunk - k);
        const float scale = in.scales[k / chunk];
        const auto* q = reinterpret_cast<const std::int8_t*>(p + k);
        float* out = values + i;
        for (std::size_t j = 0; j < m; ++j) out[j] = static_cast<float>(q[j]) * scale;
        i += m;
      }
      break;
    case codec_kind::fp4:  // low nibble first; a range may start at a high nibble
      for (std::size_t i = 0; i < n;) {
        const std::size_t k = first + i;
        const std::size_t m = std::min(n - i, (k / chunk + 1) * chunk - k);
        const float scale = in.scales[k / chunk];
        float scaled_code[16];  // what each code decodes to in this chunk
        for (std::uint8_t code = 0; code < 16; ++code) scaled_code[code] = from_fp4(code) * scale;
        float* out = values + i;
        std::size_t j = 0;
        if (k % 2 == 1) out[j++] = scaled_code[p[k / 2] >> 4];
        const std::uint8_t* pairs = p + (k + j) / 2;
        for (; j + 1 < m; j += 2, ++pairs) {
          out[j] = scaled_code[*pairs & 0x0F];
          out[j + 1] = scaled_code[*pairs >> 4];
        }
        if (j < m) out[j] = scaled_code[*pairs & 0x0F];
        i += m;
      }
      break;
    case codec_kind::topk16:  // zeros, then the kept values that fall in the range
    case codec_kind::topk32:
    case codec_kind::topk64:
      std::fill(values, values + n, 0.0f);
      for (std::size_t j = first / chunk; n > 0 && j * chunk < first + n; ++j) {
        const auto at = sparse_chunk_at(in.kind, in.count, chunk, j);
        const std::uint8_t* positions = p + at.offset;
        const std::uint8_t* codes = positions + at.kept;
        const float scale = in.scales[j];
        for (std::size_t t = 0; t < at.kept; ++t) {
          const std::size_t k = at.start + positions[t];
          if (k < first || k >= first + n) continue;
          values[k - first] = from_sparse_code((codes[t / 2] >> (4 * (t % 2))) & 0x0F) * scale;
        }
      }
      break;
  }
}

namespace {

// Each chunk's kept positions lie in the chunk and strictly increase (no duplicates); a
// scale is not negative. The sizes were checked.
status check_sparse_positions(const encoded_values& in) {
  const std::size_t chunks = in.count == 0 ? 0 : (in.count + in.chunk - 1) / in.chunk;
  // Messages are built only for a refusal: this runs on every received contribution and result.
  const auto refuse = [](std::string what, std::size_t chunk) {
    return make_error(errc::tensor_mismatch, std::move(what) + " in chunk " + std::to_string(chunk));
  };
  for (std::size_t j = 0; j < chunks; ++j) {
    const auto at = sparse_chunk_at(in.kind, in.count, in.chunk, j);
    const std::uint8_t* positions = in.payload.data() + at.offset;
    if (in.scales[j] < 0.0f) return refuse("a negative scale", j);
    for (std::size_t t = 0; t < at.kept; ++t) {
      if (positions[t] >= at.length)
        return refuse(
            "position " + std::to_string(positions[t]) + " out of range (" + std::to_string(at.length) + " values)", j);
      if (t > 0 && positions[t] == positions[t - 1])
        return refuse("duplicate position " + std::to_string(positions[t]), j);
      if (t > 0 && positions[t] < positions[t - 1]) return refuse("positions out of order", j);
    }
  }
  return {};
}

}  // namespace

status check_encoded(const encoded_values& in) {
  if (in.kind > last_codec) return make_error(errc::tensor_mismatch, "unknown codec");
  if (is_sparse(in.kind) && (in.chunk == 0 || in.chunk > max_sparse_chunk))
    return make_error(errc::tensor_mismatch, std::string(to_string(in.kind)) + " chunk of " + std::to_string(in.chunk) +
                                                 " values (1 to " + std::to_string(max_sparse_chunk) + ")");
  if (in.payload.size() != payload_bytes(in.kind, in.count, in.chunk))
    return make_error(errc::tensor_mismatch, std::string(to_string(in.kind)) + " payload of " +
                                                 std::to_string(in.payload.size()) + " bytes for " +
                                                 std::to_string(in.count) + " values");
  const bool scaled = has_scales(in.kind);
  if (scaled && (in.chunk == 0 || in.scales.size() != scale_count(in.kind, in.count, in.chunk) ||
                 (in.kind == codec_kind::fp4 && in.chunk % 2 != 0)))
    return make_error(errc::tensor_mismatch, "scales do not match the chunking");
  if (scaled && !all_finite(in.scales.data(), in.scales.size())) return make_error(errc::not_finite, "scale");
  if (is_sparse(in.kind)) return check_sparse_positions(in);
  return {};
}

status decode(const encoded_values& in, float* values) {
  if (auto err = check_encoded(in)) return err;
  const bool scaled = has_scales(in.kind);
  parallel_ranges(in.count, scaled ? in.chunk : unscaled_step,
                  [&](std::size_t begin, std::size_t end) { decode_range(in, begin, end - begin, values + begin); });
  return {};
}

status error_feedback::encode(codec_kind kind, const float* delta, std::size_t count, std::size_t chunk,
                              encoded_values& out, float decay) {
  if (residual_.size() != count) residual_.assign(count, 0.0f);
  target_.resize(count);
  for (std::size_t i = 0; i < count; ++i) target_[i] = delta[i] + decay * residual_[i];  // 1 * r == r exactly
  if (auto err = atl::encode(kind, target_.data(), count, chunk, out)) return err;
  sent_.resize(count);
  if (auto err = decode(out, sent_.data())) return err;
  for (std::size_t i = 0; i < count; ++i) residual_[i] = target_[i] - sent_[i];
  return {};
}

}  // namespace atl
