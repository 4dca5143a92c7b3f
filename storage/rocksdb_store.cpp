#include <sys/statvfs.h>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/kv_store.hpp"

namespace atl {
namespace {

constexpr column all_columns[] = {column::meta, column::members, column::fragments, column::manifest};

error storage_error(const std::string& what, const rocksdb::Status& s) {
  // RocksDB reports ENOSPC as an IOError whose subcode is kNoSpace (or only in the text).
  if (s.IsNoSpace() || s.ToString().find("No space left") != std::string::npos)
    return make_error(errc::storage_full, what +
                                              ": the disk is full; nothing was written, and commits resume by "
                                              "themselves once space is freed (" +
                                              s.ToString() + ")");
  return make_error(errc::storage_failure, what + ": " + s.ToString());
}

// Space kept free besides a batch: room for RocksDB's memtable flush and manifest.
constexpr std::uint64_t free_space_reserve = 4u << 20;

struct opened_db {
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // [0] is "default"
};

expected<opened_db> open_db(const std::string& path, bool read_only) {
  rocksdb::DBOptions options;
  options.create_if_missing = !read_only;
  options.create_missing_column_families = !read_only;
  options.max_background_jobs = 1;  // small machines; writes are rare and small
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (auto c : all_columns) families.emplace_back(column_name(c), rocksdb::ColumnFamilyOptions());
  opened_db out;
  rocksdb::DB* raw = nullptr;
  // Read-only needs no lock, so it works beside the process that writes (it sees the
  // state at open, WAL included).
  auto s = read_only ? rocksdb::DB::OpenForReadOnly(options, path, families, &out.handles, &raw)
                     : rocksdb::DB::Open(options, path, families, &out.handles, &raw);
  if (!s.ok()) return storage_error("open " + path, s);
  out.db.reset(raw);
  return out;
}

// Commits go through a free-space check first: a full disk is refused as storage_full
// before RocksDB writes, and the DB stays healthy. If a write fails anyway, the DB is
// closed and reopened before the next commit: RocksDB 7.8 must not write to a WAL after a
// failed WAL write (it asserts; fixed upstream in facebook/rocksdb#12448), and reopening
// replays the WAL up to the last good write.
class rocksdb_store : public kv_store {
 public:
  rocksdb_store(std::string path, opened_db db, bool read_only)
      : path_(std::move(path)), db_(std::move(db)), read_only_(read_only) {}

  ~rocksdb_store() override { close(); }

  status commit(const std::vector<kv_write>& batch, bool sync = true) override {
    if (read_only_) return make_error(errc::storage_failure, "commit: " + path_ + " is open read-only");
    std::uint64_t bytes = 0;
    for (const auto& w : batch) bytes += w.key.size() + w.value.size();
    if (auto err = check_free_space(2 * bytes + free_space_reserve)) return err;
    if (!db_.db) {
      auto reopened = open_db(path_, false);
      if (!reopened) return reopened.err();
      db_ = std::move(*reopened);
    }
    rocksdb::WriteBatch wb;
    for (const auto& w : batch) {
      auto* cf = handle(w.family);
      auto s = w.erase ? wb.Delete(cf, w.key) : wb.Put(cf, w.key, w.value);
      if (!s.ok()) return storage_error("batch", s);
    }
    rocksdb::WriteOptions wo;
    wo.sync = sync;  // acknowledged only once on disk (RELIABILITY.md S4), unless replicated
    auto s = db_.db->Write(wo, &wb);
    if (!s.ok()) {
      close();  // reopened by the next commit; the failed batch stays unacknowledged
      return storage_error("commit", s);
    }
    return {};
  }

  bool writable() const override { return !read_only_; }
  std::string files_dir() const override { return path_ + "/fragment-values"; }

  expected<std::optional<std::string>> get(column family, const std::string& key) const override {
    if (!db_.db)
      return make_error(errc::storage_failure, "the store is closed after a failed write; the next commit reopens it");
    std::string value;
    auto s = db_.db->Get(rocksdb::ReadOptions(), handle(family), key, &value);
    if (s.IsNotFound()) return std::optional<std::string>{};
    if (!s.ok()) return storage_error("get " + key, s);
    return std::optional<std::string>{std::move(value)};
  }

  expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                  const std::string& prefix) const override {
    if (!db_.db)
      return make_error(errc::storage_failure, "the store is closed after a failed write; the next commit reopens it");
    std::vector<std::pair<std::string, std::string>> out;
    std::unique_ptr<rocksdb::Iterator> it(db_.db->NewIterator(rocksdb::ReadOptions(), handle(family)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
      out.emplace_back(it->key().ToString(), it->value().ToString());
    if (!it->status().ok()) return storage_error("scan " + prefix, it->status());
    return out;
  }

  expected<std::vector<std::string>> scan_keys(column family, const std::string& prefix) const override {
    if (!db_.db)
      return make_error(errc::storage_failure, "the store is closed after a failed write; the next commit reopens it");
    std::vector<std::string> out;
    std::unique_ptr<rocksdb::Iterator> it(db_.db->NewIterator(rocksdb::ReadOptions(), handle(family)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
      out.push_back(it->key().ToString());
    if (!it->status().ok()) return storage_error("scan " + prefix, it->status());
    return out;
  }

 private:
  rocksdb::ColumnFamilyHandle* handle(column c) const { return db_.handles[static_cast<int>(c) + 1]; }

  status check_free_space(std::uint64_t needed) const {
    struct statvfs fs {};
    if (::statvfs(path_.c_str(), &fs) != 0) return {};  // unknown: let RocksDB try
    const std::uint64_t available = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (available >= needed) return {};
    return make_error(errc::storage_full, "commit: the disk is full (" + std::to_string(available >> 10) +
                                              " KiB free in " + path_ + ", " + std::to_string(needed >> 10) +
                                              " KiB needed); nothing was written, and commits resume by themselves "
                                              "once space is freed");
  }

  void close() {
    if (!db_.db) return;
    for (auto* h : db_.handles) db_.db->DestroyColumnFamilyHandle(h);
    db_.handles.clear();
    (void)db_.db->Close();
    db_.db.reset();
  }

  std::string path_;
  opened_db db_;
  bool read_only_;
};

}  // namespace

expected<std::unique_ptr<kv_store>> open_rocksdb_store(const std::string& path) {
  auto db = open_db(path, false);
  if (!db) return db.err();
  return std::unique_ptr<kv_store>(new rocksdb_store(path, std::move(*db), false));
}

expected<std::unique_ptr<kv_store>> open_rocksdb_store_read_only(const std::string& path) {
  auto db = open_db(path, true);
  if (!db) return db.err();
  return std::unique_ptr<kv_store>(new rocksdb_store(path, std::move(*db), true));
}

}  // namespace atl
