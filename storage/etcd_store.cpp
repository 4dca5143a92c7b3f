#include "storage/etcd_store.hpp"

#include <mutex>

#include "runtime/etcd/etcd_client.hpp"

namespace atl {
namespace {

class etcd_store : public kv_store {
 public:
  etcd_store(const std::string& endpoints, std::string root, etcd_fence fence)
      : etcd_(endpoints), root_(std::move(root)), fence_(std::move(fence)) {}

  status commit(const std::vector<kv_write>& batch, bool /*sync*/ = true) override {
    std::vector<etcd_write> writes;
    writes.reserve(batch.size());
    for (const auto& w : batch) writes.push_back({key_of(w.family, w.key), w.value, w.erase});
    std::lock_guard<std::mutex> lock(mu_);
    auto held = etcd_.write_if_held(fence_.election_key, fence_.term, writes);
    if (!held) return held.err();
    if (!*held)
      return make_error(errc::stale_epoch, "term " + std::to_string(fence_.term) + " no longer holds " +
                                               fence_.election_key + ": another head leads");
    return {};
  }

  expected<std::optional<std::string>> get(column family, const std::string& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    auto value = etcd_.get(key_of(family, key));
    if (!value) return value.err();
    if (!*value) return std::optional<std::string>{};
    return std::optional<std::string>{(*value)->value};
  }

  expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                  const std::string& prefix) const override {
    const auto column_prefix = key_of(family, "");
    std::lock_guard<std::mutex> lock(mu_);
    auto rows = etcd_.get_prefix(column_prefix + prefix);
    if (!rows) return rows.err();
    std::vector<std::pair<std::string, std::string>> out;
    out.reserve(rows->size());
    for (auto& [key, value] : *rows) out.emplace_back(key.substr(column_prefix.size()), std::move(value.value));
    return out;
  }

 private:
  std::string key_of(column family, const std::string& key) const {
    return root_ + "/" + column_name(family) + "/" + key;
  }

  mutable std::mutex mu_;  // the client is one caller's at a time
  mutable etcd_client etcd_;
  std::string root_;
  etcd_fence fence_;
};

}  // namespace

std::unique_ptr<kv_store> make_etcd_store(const std::string& endpoints, std::string root, etcd_fence fence) {
  return std::make_unique<etcd_store>(endpoints, std::move(root), std::move(fence));
}

}  // namespace atl
