#pragma once
// The data cursor's stored form (actors/decisions/data_cursor.hpp): the bytes its owner
// persists with the registry's snapshot, and reads back on a restart or a failover.
//
//   "ATDC" | version u32 | config | lease position | chunks | returned | ties | recent
//   commits | commit epochs | digest64 of everything before it
// (version 2; version 1, without the chunks' gone epochs and the commit epochs, still reads)
//
// Every count is checked against the bytes left before anything is allocated, so a
// damaged or hostile record costs no more memory than its own size.
#include <string>

#include "actors/decisions/data_cursor.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

std::string encode_cursor(const data::cursor_snapshot& snap);
// Typed errors: checksum_mismatch (a flipped byte), storage_failure (bad magic, an unknown
// version, a truncated or oversized field). What decodes is checked again, as a whole, by
// data_cursor::restore.
expected<data::cursor_snapshot> decode_cursor(const std::string& bytes);

}  // namespace atl
