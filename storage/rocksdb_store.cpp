#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "storage/kv_store.hpp"

namespace atl {
namespace {

constexpr column all_columns[] = {column::meta, column::members, column::fragments, column::manifest};

error storage_error(const std::string& what, const rocksdb::Status& s) {
  return make_error(errc::storage_failure, what + ": " + s.ToString());
}

class rocksdb_store : public kv_store {
 public:
  rocksdb_store(std::unique_ptr<rocksdb::DB> db, std::vector<rocksdb::ColumnFamilyHandle*> handles)
      : db_(std::move(db)), handles_(std::move(handles)) {}

  ~rocksdb_store() override {
    for (auto* h : handles_) db_->DestroyColumnFamilyHandle(h);
    db_->Close();
  }

  status commit(const std::vector<kv_write>& batch) override {
    rocksdb::WriteBatch wb;
    for (const auto& w : batch) {
      auto* cf = handle(w.family);
      auto s = w.erase ? wb.Delete(cf, w.key) : wb.Put(cf, w.key, w.value);
      if (!s.ok()) return storage_error("batch", s);
    }
    rocksdb::WriteOptions wo;
    wo.sync = true;  // acknowledged only once on disk (RELIABILITY.md S4)
    auto s = db_->Write(wo, &wb);
    if (!s.ok()) {
      // After a hard error (ENOSPC) RocksDB turns read-only; try to resume so a later
      // commit can succeed once space returns. The failed batch stays unacknowledged.
      if (s.IsIOError() || s.IsNoSpace()) (void)db_->Resume();
      return storage_error("commit", s);
    }
    return {};
  }

  expected<std::optional<std::string>> get(column family, const std::string& key) const override {
    std::string value;
    auto s = db_->Get(rocksdb::ReadOptions(), handle(family), key, &value);
    if (s.IsNotFound()) return std::optional<std::string>{};
    if (!s.ok()) return storage_error("get " + key, s);
    return std::optional<std::string>{std::move(value)};
  }

  expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                   const std::string& prefix) const override {
    std::vector<std::pair<std::string, std::string>> out;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), handle(family)));
    for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next())
      out.emplace_back(it->key().ToString(), it->value().ToString());
    if (!it->status().ok()) return storage_error("scan " + prefix, it->status());
    return out;
  }

 private:
  rocksdb::ColumnFamilyHandle* handle(column c) const { return handles_[static_cast<int>(c) + 1]; }

  std::unique_ptr<rocksdb::DB> db_;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // [0] is "default"
};

}  // namespace

expected<std::unique_ptr<kv_store>> open_rocksdb_store(const std::string& path) {
  rocksdb::DBOptions options;
  options.create_if_missing = true;
  options.create_missing_column_families = true;
  options.max_background_jobs = 1;  // small machines; writes are rare and small
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName, rocksdb::ColumnFamilyOptions());
  for (auto c : all_columns) families.emplace_back(column_name(c), rocksdb::ColumnFamilyOptions());
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::DB* raw = nullptr;
  auto s = rocksdb::DB::Open(options, path, families, &handles, &raw);
  if (!s.ok()) return storage_error("open " + path, s);
  return std::unique_ptr<kv_store>(new rocksdb_store(std::unique_ptr<rocksdb::DB>(raw), std::move(handles)));
}

}  // namespace atl
