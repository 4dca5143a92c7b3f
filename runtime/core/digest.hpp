#pragma once
// digest64: a stable 64-bit hash of raw bytes, used for tensor checksums on the wire and
// for comparing copies of theta_global across processes. Stable means: the same bytes give
// the same value on every build and machine (little-endian reads, fixed constants); the
// unit tests pin known values. It is not a cryptographic hash.
#include <cstddef>
#include <cstdint>
#include <string>

namespace atl {

std::uint64_t digest64(const void* data, std::size_t size);

// digest64 of bytes that arrive in pieces: update() with each piece in order, then
// finish() gives digest64 of their concatenation (a checkpoint record hashed from its
// header and the two tensors where they lie, not from a copy that joins them).
class digest_stream {
 public:
  digest_stream();
  void update(const void* data, std::size_t size);
  std::uint64_t finish() const;

 private:
  void absorb(const unsigned char* block);  // one 32-byte block into the lanes

  std::uint64_t lane_[4];
  unsigned char pending_[32];  // the start of a block that has not arrived whole
  std::size_t pending_size_ = 0;
  std::uint64_t total_ = 0;
};

// 16 lowercase hex digits, the form shown by atollctl.
std::string digest_hex(std::uint64_t digest);

}  // namespace atl
