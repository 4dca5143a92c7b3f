// Fuzzes the data cursor's record decoder (actors/shared/cursor_record.hpp), which reads
// what the registry persisted. Each input is tried as it is (almost always refused by its
// checksum) and with its checksum made right, so that the fuzzer reaches the structure: a
// record of the current version that decodes must encode back to the same bytes (one of
// version 1 encodes as the current version, which must read back the same), and restoring a cursor from it
// must return a typed error or a cursor that leases, ties and reports without crashing.
#include <cstdint>
#include <cstring>
#include <string>

#include "actors/shared/cursor_record.hpp"
#include "tests/fuzz/raw_and_sealed.hpp"

namespace {

void check(const std::string& bytes) {
  auto snap = atl::decode_cursor(bytes);
  if (!snap) return;
  const auto again = atl::encode_cursor(*snap);
  std::uint32_t version = 0;
  std::memcpy(&version, bytes.data() + 4, sizeof version);  // decode checked the magic before it
  if (version == 1) {
    auto current = atl::decode_cursor(again);
    if (!current || atl::encode_cursor(*current) != again) __builtin_trap();
  } else if (again != bytes) {
    __builtin_trap();
  }
  auto cursor = atl::data::data_cursor::restore(*snap);
  if (!cursor) return;
  (void)cursor->progress_now();
  for (int i = 0; i < 4; ++i) {
    const auto lease = cursor->lease("worker/9.0");
    if (!lease) break;
    (void)cursor->tie("worker/9.0", 0, 1, *lease, cursor->positions_of(*lease));
  }
  cursor->committed(0, 1, 1, {"worker/9.0"}, {});
  cursor->worker_gone("worker/9.0", 2);  // waits for a commit of epoch 2
  cursor->run_finished();
  (void)cursor->progress_now();
}

}  // namespace

// The same bytes as the header of a record in parts without buckets (a whole record reads
// as decode_cursor's; a header that names buckets is refused): a snapshot that decodes
// restores to a typed error or a cursor.
void check_as_header(const std::string& bytes) {
  auto snap = atl::decode_cursor_parts(bytes, {});
  if (snap) (void)atl::data::data_cursor::restore(*snap);
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  atl::fuzzing::raw_and_sealed(data, size, check);
  atl::fuzzing::raw_and_sealed(data, size, check_as_header);
  return 0;
}
