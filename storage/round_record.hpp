#pragma once
// The round log's record: what a committed outer round published, or what it averaged and
// how, so that a keeper reaches the round's theta_global and momentum (and, but for a
// result record, the residual) by running the coordinator's own step
// (runtime/algorithm/outer_round.hpp) on its copy of the previous round's state.
//
// Three forms (record_form):
//   result   the encoded change of theta the round's contributors received, in the result
//            codec (the default with low-bit results, since issue 70): the bytes a worker
//            decodes and applies, whatever the number of workers; replayed by
//            apply_published_change (the rule's state follows the result).
//   inputs   each contributor's encoded pseudo-gradient and weight as received, in worker-id
//            order (the order the coordinator averaged them in);
//   average  the round's fp32 average, when that is fewer bytes than the inputs
//            (log_the_average). fp32 results log these two; so did every round before the
//            result form, and a store written then replays them as it did (no upgrade).
// Decision: fragment, round, epoch, the outer rule, and the digest of the theta_global the
// round reaches; applying the record checks it (digest_mismatch otherwise).
//
// Stored form (little-endian): header, then each input's payload and scales bytes in order,
// then digest64 of everything before it. decode() checks that checksum first
// (checksum_mismatch) and every size against the codec (storage_failure), so a flipped byte
// or a truncated file is refused, never replayed.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/algorithm/outer_round.hpp"
#include "runtime/core/byte_buffer.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

struct round_input {
  std::string worker;  // empty for the average
  float weight = 1.0f;
  codec_kind codec = codec_kind::fp32;
  std::uint32_t chunk = 0;  // values per scale (int8, fp4)
  byte_buffer payload;  // the codes (fp32: the values' bytes)
  byte_buffer scales;  // fp32 scales (int8, fp4); empty otherwise
};

enum class record_form : std::uint8_t { inputs = 0, average = 1, result = 2 };
const char* to_string(record_form form);

struct round_record {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::uint64_t count = 0;  // values in the fragment
  std::uint64_t theta_digest = 0;  // digest64 of theta_global after the round
  outer_rule rule;
  record_form form = record_form::inputs;  // average: one fp32 input; result: one input in the result codec
  std::vector<round_input> inputs;

  // Bytes of the inputs (what a keeper writes and receives beyond a small header).
  std::uint64_t input_bytes() const;
};

// Whether a round logs its fp32 average rather than its encoded contributions: only when
// the contributions are more bytes (fp32 from two workers on; int8 from four on, with the
// scales of 256-value chunks; fp4 from nine on).
bool log_the_average(std::uint64_t contribution_bytes, std::uint64_t count);

// Every input has the sizes its codec gives for `count` values, and there is one.
status check_record(const round_record& record);

// The stored form as pieces that point into the record's buffers: header, bytes, checksum.
// The pieces are valid while `record` and the returned object live.
class encoded_record {
 public:
  explicit encoded_record(const round_record& record);
  struct piece {
    const void* data;
    std::size_t size;
  };
  const std::vector<piece>& pieces() const { return pieces_; }
  std::string joined() const;

 private:
  std::string header_;
  std::uint64_t checksum_ = 0;
  std::vector<piece> pieces_;
};

expected<round_record> decode_record(const std::string& bytes);

// Working memory for apply_record, kept between rounds.
struct record_scratch {
  outer_scratch outer;
  encoded_values change;  // a result record's, as the step reads it
  std::vector<std::vector<float>> inputs;  // decoded: fp32, bf16, fp16 and the average
  std::vector<encoded_values> encoded;  // int8, fp4: decoded block by block by the step
};

// The record of a round that published `change` in the rule's result codec (a result
// record; worker "" and weight 1): its bytes as given (a coordinator passes the frames its
// results carry, shared rather than copied), or copied out of `change`.
round_record result_record(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch, std::uint64_t theta_digest,
                           const outer_rule& rule, std::uint64_t count, byte_buffer payload, byte_buffer scales);
round_record result_record(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch, std::uint64_t theta_digest,
                           const outer_rule& rule, const encoded_values& change);

// Applies `record` to `state` (the fragment's state after round record.round - 1) with the
// coordinator's step. Errors: tensor_mismatch (the state has another size), a codec's
// decode error, digest_mismatch (the theta_global reached is not the one the coordinator
// logged: `state` then holds what this keeper computed, and must be discarded).
status apply_record(const round_record& record, outer_state& state, record_scratch& scratch);

}  // namespace atl
