#pragma once
// Encodings of pseudo-gradients for the wire. Workers encode, coordinators decode to
// fp32 and average in fp32.
//
//   fp32  4 bytes/value, exact
//   bf16  2 bytes/value, round to nearest even (8 exponent bits: never overflows)
//   fp16  2 bytes/value, round to nearest even, saturates at +-65504
//   int8  1 byte/value + one fp32 scale per chunk: q = round(x / s), s = max|x| / 127;
//         error at most s / 2 per value
//   fp4   e2m1 (OCP MX FP4: values 0, 0.5, 1, 1.5, 2, 3, 4, 6), two values per byte (low
//         nibble first) + one fp32 scale per chunk, s = max|x| / 6; error at most s per
//         value (half the widest gap, 4..6). e2m1 rather than e3m0: with a per-chunk scale
//         the range of e3m0 (powers of two up to 16) is not needed, and e2m1's extra
//         mantissa bit halves the error of the large values that dominate a chunk.
//   topk16, topk32, topk64  sparse: of each chunk (at most 256 values) only the
//         k = max(1, chunk / D) largest magnitudes are sent (D = 16, 32, 64; ties go to the
//         lower index), each as its position in the chunk (1 byte) and a 4-bit code q in
//         -7..7 (value q * s, s = the largest kept magnitude / 7, one fp32 scale per chunk;
//         zero is exact); the rest decode as 0. A kept value costs 12 bits plus 32 / k for
//         the scale: 16 bits at chunk 256 with topk32, 1/64 of fp32's bytes. Error at most
//         s / 2 per kept value, and the whole value for one not kept: with error feedback
//         it goes into the residual and is sent later. Positions strictly increase within
//         a chunk (a duplicate or one past the chunk is refused). 4 bits rather than 2:
//         two bits have no zero, and a chunk with fewer non-zeros than k would send noise.
// Zeros encode exactly in every codec; a chunk of zeros has scale 0. Non-finite input is
// refused (errc::not_finite): it would poison a round.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

enum class codec_kind : std::uint8_t {
  fp32 = 0,
  bf16 = 1,
  fp16 = 2,
  int8 = 3,
  fp4 = 4,
  topk16 = 5,
  topk32 = 6,
  topk64 = 7
};
constexpr codec_kind last_codec = codec_kind::topk64;  // anything above is unknown (hostile input)

expected<codec_kind> parse_codec(const std::string& name);
const char* to_string(codec_kind kind);

struct encoded_values {
  codec_kind kind = codec_kind::fp32;
  std::size_t count = 0;  // values encoded
  std::size_t chunk = 0;  // values per scale (int8, fp4, topk)
  std::vector<std::uint8_t> payload;  // little-endian codes
  std::vector<float> scales;  // one per chunk (int8, fp4); empty otherwise
};

// int8 and fp4 carry one fp32 scale per chunk; the others none. A value of a scaled codec
// is a code times a finite scale, so it is finite whenever its scales are.
inline bool is_sparse(codec_kind kind) { return kind >= codec_kind::topk16 && kind <= codec_kind::topk64; }
inline bool has_scales(codec_kind kind) {
  return kind == codec_kind::int8 || kind == codec_kind::fp4 || is_sparse(kind);
}
// A sparse codec's values kept of each (full) chunk; 0 for the dense codecs.
std::size_t kept_per_chunk(codec_kind kind, std::size_t chunk);
constexpr std::size_t max_sparse_chunk = 256;  // a position is one byte

// Bytes of payload and number of scales a codec uses for `count` values (the chunk
// matters to the sparse codecs only).
std::size_t payload_bytes(codec_kind kind, std::size_t count, std::size_t chunk = 0);
std::size_t scale_count(codec_kind kind, std::size_t count, std::size_t chunk);

status encode(codec_kind kind, const float* values, std::size_t count, std::size_t chunk, encoded_values& out);
// Refuses payloads and scales whose sizes do not match `count` (hostile input), as
// check_encoded does, and scales that are not finite.
status decode(const encoded_values& in, float* values);
status check_encoded(const encoded_values& in);

// encode() and decode() a range at a time, for a caller that makes or uses a tensor block
// by block while the block is in cache (the outer step, runtime/algorithm/outer_round.hpp).
// shape_encoded sizes `out` for `count` values and checks the chunk as encode() does;
// encode_range then writes values[0, n) as values [first, first + n) of the tensor, the
// very bytes encode() writes there. The caller has checked that the values are finite, and
// `first` (and n, unless the range ends the tensor) is a multiple of the chunk for int8 and
// fp4. decode_range reads any range of a tensor that check_encoded accepted.
status shape_encoded(codec_kind kind, std::size_t count, std::size_t chunk, encoded_values& out);
void encode_range(const float* values, std::size_t first, std::size_t n, encoded_values& out);
void decode_range(const encoded_values& in, std::size_t first, std::size_t n, float* values);

// Error feedback (LoCo-style residual): what was meant minus what was sent is added to
// the next contribution, so quantization errors do not accumulate.
//
// With a decay beta < 1 the residual is SparseLoCo's accumulator (arXiv 2508.15706):
//   e = beta * e + delta;  sent = decode(encode(e));  e = e - sent
// Under aggressive sparsity most of a round's change waits in e for later rounds, and the
// decay turns that wait into a momentum local to the worker, so the outer step needs none
// (diloco.outer = sparseloco). beta = 1 is plain error feedback, bit for bit.
class error_feedback {
 public:
  // Encodes delta + decay * residual and keeps the new residual. `delta` has `count` values.
  status encode(codec_kind kind, const float* delta, std::size_t count, std::size_t chunk, encoded_values& out,
                float decay = 1.0f);
  const std::vector<float>& residual() const { return residual_; }

 private:
  std::vector<float> residual_;
  std::vector<float> target_, sent_;  // scratch, kept to avoid per-round allocation
};

}  // namespace atl
