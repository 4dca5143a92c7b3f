#pragma once
// Files for values too large to pass through RocksDB well: a fragment's committed round is
// tens to hundreds of MiB, which RocksDB would copy into its write batch, its WAL, its
// memtable and then a blob file (four copies and two writes; measured 1.3 to 2 s for a
// 128 MiB record on the averaging bench's machine). Here the bytes are written once, made
// durable, and only then named by a small RocksDB record (storage/checkpoint_store.cpp).
//
// A file appears under its final name only whole and on disk: written as NAME.tmp,
// fdatasync'd, renamed, and the directory fsync'd. A crash leaves at most a .tmp file or
// a file no record names; remove_unlisted() clears both.
#include <set>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl::value_files {

// Bytes that the caller keeps alive for the call.
struct piece {
  const void* data;
  std::size_t size;
};

// Writes the pieces, in order, to DIR/NAME durably (creating DIR): one file from bytes
// that lie apart (a record's header and the frames its tensors arrived in), not copied
// together first. A full disk is errc::storage_full ("the disk is full", checked before
// writing and on ENOSPC), anything else errc::storage_failure; nothing is left under
// NAME either way.
status write_durably(const std::string& dir, const std::string& name, const std::vector<piece>& pieces);
// The same, reusing DIR/SPARE (a file no record names any more) when it has exactly the
// size to write: it becomes NAME.tmp and is overwritten in place, so no block is freed or
// allocated and fdatasync commits no metadata. Creating a new 128 MiB file and fdatasyncing
// it took 0.2 to 2.5 s with two keepers writing at once on this machine's ext4 (the journal
// entangles their data), overwriting one 0.11 s. A spare of another size is removed and a
// new file written. SPARE is gone afterwards either way.
status write_durably(const std::string& dir, const std::string& name, const std::vector<piece>& pieces,
                     const std::string& spare);
status write_durably(const std::string& dir, const std::string& name, const std::string& bytes);
// write_durably without fdatasync and the directory's fsync when `flush` is false
// (storage.sync = replicated): the file survives the process, not the machine. A file cut
// short by a crash is refused by its record's checksum when read.
status write(const std::string& dir, const std::string& name, const std::vector<piece>& pieces,
             const std::string& spare, bool flush);

// The whole of DIR/NAME; a missing file is errc::storage_failure.
expected<std::string> read(const std::string& dir, const std::string& name);

// Removes DIR/NAME if it exists (a failure is ignored: the next sweep retries).
void remove(const std::string& dir, const std::string& name);

// Removes every file in DIR that `keep` does not name, .tmp files included.
void remove_unlisted(const std::string& dir, const std::set<std::string>& keep);

}  // namespace atl::value_files
