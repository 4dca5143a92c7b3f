#pragma once
// Fixed-size fields of the records Atoll writes to disk (checkpoint snapshots, round log
// records), in the machine's byte order (little-endian on every platform Atoll builds for),
// appended to and read from a byte string. take() fails rather than read past the end.
#include <cstddef>
#include <cstring>
#include <string>

namespace atl::binary_fields {

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

template <class T>
bool take(const std::string& in, std::size_t& pos, T& v) {
  if (pos + sizeof v > in.size()) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

}  // namespace atl::binary_fields
