#include "runtime/digest.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace atl {
namespace {

constexpr std::uint64_t prime1 = 0x9E3779B185EBCA87ULL;
constexpr std::uint64_t prime2 = 0xC2B2AE3D27D4EB4FULL;

std::uint64_t mix(std::uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

std::uint64_t load_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

digest_stream::digest_stream() : lane_{prime1, prime2, prime1 ^ prime2, ~prime1} {}

// Four independent lanes keep the multiply chains parallel (about 4 GB/s).
void digest_stream::absorb(const unsigned char* block) {
  for (int k = 0; k < 4; ++k) lane_[k] = (lane_[k] ^ load_le64(block + 8 * k)) * prime1 + prime2;
}

void digest_stream::update(const void* data, std::size_t size) {
  if (size == 0) return;  // data may be null then (an empty frame), and memcpy must not see it
  const auto* p = static_cast<const unsigned char*>(data);
  total_ += size;
  if (pending_size_ > 0) {
    const auto take = std::min(size, sizeof pending_ - pending_size_);
    std::memcpy(pending_ + pending_size_, p, take);
    pending_size_ += take;
    p += take;
    size -= take;
    if (pending_size_ < sizeof pending_) return;
    absorb(pending_);
    pending_size_ = 0;
  }
  for (; size >= 32; p += 32, size -= 32) absorb(p);
  std::memcpy(pending_, p, size);
  pending_size_ = size;
}

// The lanes, then what is left of the last block: its 8-byte words, then its tail bytes.
std::uint64_t digest_stream::finish() const {
  std::uint64_t h = total_ * prime2;
  for (int k = 0; k < 4; ++k) h = mix(h ^ lane_[k]) * prime1;
  std::size_t i = 0;
  for (; i + 8 <= pending_size_; i += 8) h = mix(h ^ load_le64(pending_ + i)) * prime1;
  std::uint64_t tail = 0;
  for (std::size_t k = 0; i < pending_size_; ++i, ++k) tail |= static_cast<std::uint64_t>(pending_[i]) << (8 * k);
  return mix(h ^ tail ^ prime2);
}

std::uint64_t digest64(const void* data, std::size_t size) {
  digest_stream s;
  s.update(data, size);
  return s.finish();
}

std::string digest_hex(std::uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

}  // namespace atl
