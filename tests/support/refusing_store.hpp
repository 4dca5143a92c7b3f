#pragma once
// A memory store (storage/kv_store.hpp) that refuses every commit while `refuse` is set,
// with the error given (a full disk; an etcd store whose writer's term has ended), and
// remembers how many writes the last batch it took held.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "storage/kv_store.hpp"

namespace atl::testing {

class refusing_store : public kv_store {
 public:
  explicit refusing_store(errc code = errc::storage_failure, std::string why = "refused")
      : code_(code), why_(std::move(why)) {}
  status commit(const std::vector<kv_write>& batch, bool sync) override {
    if (refuse) return make_error(code_, why_);
    last_batch = batch.size();
    return inner_->commit(batch, sync);
  }
  expected<std::optional<std::string>> get(column family, const std::string& key) const override {
    return inner_->get(family, key);
  }
  expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                  const std::string& prefix) const override {
    return inner_->scan(family, prefix);
  }

  bool refuse = false;
  std::size_t last_batch = 0;

 private:
  errc code_;
  std::string why_;
  std::unique_ptr<kv_store> inner_ = make_memory_store();
};

}  // namespace atl::testing
