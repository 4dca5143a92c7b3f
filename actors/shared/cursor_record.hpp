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
#include <map>
#include <string>

#include "actors/decisions/data_cursor.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

std::string encode_cursor(const data::cursor_snapshot& snap);
// Typed errors: checksum_mismatch (a flipped byte), storage_failure (bad magic, an unknown
// version, a truncated or oversized field). What decodes is checked again, as a whole, by
// data_cursor::restore.
expected<data::cursor_snapshot> decode_cursor(const std::string& bytes);

// The record in parts, as the registry persists it (storage/registry_store.hpp writes only
// the parts that changed): a header, with everything but the chunks, and the chunks in
// buckets of cursor_bucket_chunks consecutive indices of one epoch, each a record of its own
// (encode_cursor's form, holding only those chunks) under its cursor_bucket_key. A save
// after a report then writes the header and the buckets of the chunks it touched, not the
// run's whole history: written whole, a record of some 13 thousand chunks passed etcd's
// largest request (1.5 MiB), and a head on etcd could no longer save. Buckets of 256: the
// first save of a record read whole (from before parts) fits etcd's 128 writes a
// transaction, as every record etcd could hold is at most about 25 thousand chunks.
//   header: "ATDP" | version u32 | chunks u64 | buckets u32 | u32 n | n bytes: the record
//           without its chunks | digest64 of everything before it
struct cursor_parts {
  std::string header;
  std::map<std::string, std::string> buckets;  // by cursor_bucket_key, which sorts in chunk order
};
inline constexpr std::uint64_t cursor_bucket_chunks = 256;
std::string cursor_bucket_key(data::chunk_id chunk);  // hex epoch "/" hex bucket, fixed widths
cursor_parts encode_cursor_parts(const data::cursor_snapshot& snap);
// `parts` brought up to `cursor` after the chunks `changed` (data_cursor::take_changed) were:
// their buckets and the header made again, the rest kept; with no buckets yet (a cursor
// read from a whole record, or one never saved in parts), every bucket. What it makes is
// what encode_cursor_parts(cursor.snapshot()) makes, at the cost of the change.
void update_cursor_parts(const data::data_cursor& cursor, const std::vector<data::chunk_id>& changed,
                         cursor_parts& parts);
// The snapshot of a header and its buckets; or, for a header that is a whole record
// (encode_cursor: a store written before parts), that record's, with no buckets. Typed errors
// as decode_cursor's, and storage_failure for a bucket missing or extra, or holding a chunk
// of another key.
expected<data::cursor_snapshot> decode_cursor_parts(const std::string& header,
                                                    const std::map<std::string, std::string>& buckets);

}  // namespace atl
