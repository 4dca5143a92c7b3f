// Fuzzes the actor id parser (every envelope's sender and receiver): each input is a
// valid id that formats back to itself, or a typed malformed_id error.
#include <cstdint>
#include <string_view>

#include "runtime/core/actor_id.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto id = atl::parse_actor_id(text);
  if (id && id->str() != text) __builtin_trap();
  if (!id && id.err().code != atl::errc::malformed_id) __builtin_trap();
  return 0;
}
