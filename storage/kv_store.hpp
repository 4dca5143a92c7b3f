#pragma once
// Key-value storage behind an interface: RocksDB on disk for real processes
// (storage/rocksdb_store.hpp), an in-memory map for protocol tests. Keys live in column
// families; a commit of several writes is atomic and, for RocksDB, synced to disk before
// it returns OK. Statuses are converted to atoll errors here; nothing throws.
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

enum class column { meta, members, fragments, manifest };
const char* column_name(column c);

struct kv_write {
  column family;
  std::string key;
  std::string value;
  bool erase = false;
};

class kv_store {
 public:
  virtual ~kv_store() = default;
  // All writes or none; durable when it returns success. `sync` false (storage.sync =
  // replicated): in the write-ahead log, which survives the process but not the machine.
  virtual status commit(const std::vector<kv_write>& batch, bool sync = true) = 0;
  virtual expected<std::optional<std::string>> get(column family, const std::string& key) const = 0;
  // Keys with `prefix`, in key order.
  virtual expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                          const std::string& prefix) const = 0;
  // False for a store opened to read beside its writer: commit() refuses.
  virtual bool writable() const { return true; }
  // A directory beside the store for values too large to pass through it well
  // (storage/value_files.hpp); empty: keep every value in the store.
  virtual std::string files_dir() const { return {}; }
  // The keys alone (a store may skip reading the values).
  virtual expected<std::vector<std::string>> scan_keys(column family, const std::string& prefix) const {
    auto rows = scan(family, prefix);
    if (!rows) return rows.err();
    std::vector<std::string> keys;
    for (auto& [key, value] : *rows) keys.push_back(std::move(key));
    return keys;
  }
};

std::unique_ptr<kv_store> make_memory_store();
// Opens (creating if needed) a RocksDB database at `path` with Atoll's column families.
expected<std::unique_ptr<kv_store>> open_rocksdb_store(const std::string& path);
// Opens an existing database to read, beside a process that may be writing it (`atoll
// export`); commits are refused.
expected<std::unique_ptr<kv_store>> open_rocksdb_store_read_only(const std::string& path);

}  // namespace atl
