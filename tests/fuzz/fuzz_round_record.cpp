// Fuzzes the round log's record decoder (storage/round_record.hpp), which reads what a
// keeper wrote to disk. Each input is tried as it is (almost always refused by its
// checksum) and with its checksum made right, so that the fuzzer reaches the structure:
// a record that decodes must encode back to the same bytes, and applying it to a state of
// its size must return a typed error or reach a state, never crash.
#include <cstdint>
#include <string>

#include "storage/round_record.hpp"
#include "tests/fuzz/raw_and_sealed.hpp"

namespace {

void check(const std::string& bytes) {
  auto record = atl::decode_record(bytes);
  if (!record) return;
  if (atl::encoded_record(*record).joined() != bytes) __builtin_trap();
  if (record->count > (1u << 16)) return;  // bounded work per input
  atl::outer_state state;
  state.theta.assign(record->count, 0.5f);
  atl::record_scratch scratch;
  (void)atl::apply_record(*record, state, scratch);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  atl::fuzzing::raw_and_sealed(data, size, check);
  return 0;
}
