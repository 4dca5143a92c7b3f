#pragma once
// The fuzzers of checksummed records: each input is tried as it is (almost always refused
// by its checksum) and with a digest64 of it appended, so that the fuzzer reaches the
// structure behind the checksum.
#include <cstdint>
#include <string>

#include "runtime/core/digest.hpp"

namespace atl::fuzzing {

template <class Check>
void raw_and_sealed(const std::uint8_t* data, std::size_t size, Check check) {
  const std::string raw(reinterpret_cast<const char*>(data), size);
  check(raw);
  std::string sealed = raw;
  const std::uint64_t digest = digest64(raw.data(), raw.size());
  sealed.append(reinterpret_cast<const char*>(&digest), sizeof digest);
  check(sealed);
}

}  // namespace atl::fuzzing
