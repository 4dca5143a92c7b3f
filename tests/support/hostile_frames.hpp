#pragma once
// Hand-made hostile Cap'n Proto frames (RELIABILITY.md S6): messages whose bytes are a
// well-formed segment table but whose pointers attack the reader. Used by the wire
// tests, the hostile client of the process tests and the fuzzers' seed corpus.
//
// Pointer encoding (capnp encoding spec): a struct pointer is
//   bits 0-1 = 0, bits 2-31 = signed offset in words from the end of the pointer,
//   bits 32-47 = data words, bits 48-63 = pointer count.
#include <cstdint>
#include <cstring>
#include <vector>

namespace atl::testing {

using word = std::uint64_t;

inline word struct_pointer(std::int32_t offset, std::uint16_t data_words, std::uint16_t pointers) {
  return (static_cast<word>(static_cast<std::uint32_t>(offset) << 2)) | (static_cast<word>(data_words) << 32) |
         (static_cast<word>(pointers) << 48);
}

// One segment, framed as a single-segment message (segment count - 1 = 0, then its size).
inline std::vector<std::uint8_t> single_segment(const std::vector<word>& segment) {
  std::vector<std::uint8_t> out(8 + segment.size() * 8);
  const std::uint32_t header[2] = {0, static_cast<std::uint32_t>(segment.size())};
  std::memcpy(out.data(), header, 8);
  std::memcpy(out.data() + 8, segment.data(), segment.size() * 8);
  return out;
}

// A chain of `depth` structs, each holding a pointer to the next: trips the nesting limit.
inline std::vector<std::uint8_t> deeply_nested(int depth) {
  std::vector<word> seg;
  for (int i = 0; i < depth; ++i) seg.push_back(struct_pointer(0, 0, 1));  // next word is its struct
  seg.push_back(0);  // the last pointer is null
  return single_segment(seg);
}

// A root struct whose `fanout` pointers all point at one struct of `target_words` data
// words: tiny on the wire, fanout * target_words words to traverse (amplification).
inline std::vector<std::uint8_t> pointer_amplified(std::uint16_t fanout, std::uint16_t target_words) {
  std::vector<word> seg;
  seg.push_back(struct_pointer(0, 0, fanout));  // root: the struct right after
  const std::int32_t target = 1 + fanout;  // index of the shared struct
  for (std::int32_t i = 0; i < fanout; ++i) seg.push_back(struct_pointer(target - (1 + i) - 1, target_words, 0));
  seg.insert(seg.end(), target_words, 0x4141414141414141ull);
  return single_segment(seg);
}

// A segment table claiming `segments` segments of one word each, followed by too few bytes.
inline std::vector<std::uint8_t> too_many_segments(std::uint32_t segments) {
  std::vector<std::uint8_t> out(16, 0);
  const std::uint32_t header[2] = {segments - 1, 1};
  std::memcpy(out.data(), header, 8);
  return out;
}

}  // namespace atl::testing
