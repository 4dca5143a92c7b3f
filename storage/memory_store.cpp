#include <map>
#include <mutex>

#include "storage/kv_store.hpp"

namespace atl {
namespace {

class memory_store : public kv_store {
 public:
  status commit(const std::vector<kv_write>& batch, bool /*sync*/ = true) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& w : batch) {
      auto& m = data_[static_cast<int>(w.family)];
      if (w.erase) m.erase(w.key);
      else m[w.key] = w.value;
    }
    return {};
  }
  expected<std::optional<std::string>> get(column family, const std::string& key) const override {
    std::lock_guard<std::mutex> lock(mu_);
    const auto& m = data_[static_cast<int>(family)];
    auto it = m.find(key);
    if (it == m.end()) return std::optional<std::string>{};
    return std::optional<std::string>{it->second};
  }
  expected<std::vector<std::pair<std::string, std::string>>> scan(column family,
                                                                  const std::string& prefix) const override {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::pair<std::string, std::string>> out;
    const auto& m = data_[static_cast<int>(family)];
    for (auto it = m.lower_bound(prefix); it != m.end() && it->first.rfind(prefix, 0) == 0; ++it)
      out.emplace_back(it->first, it->second);
    return out;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::string> data_[4];
};

}  // namespace

const char* column_name(column c) {
  switch (c) {
    case column::meta: return "meta";
    case column::members: return "members";
    case column::fragments: return "fragments";
    case column::manifest: return "manifest";
  }
  return "unknown";
}

std::unique_ptr<kv_store> make_memory_store() { return std::make_unique<memory_store>(); }

}  // namespace atl
