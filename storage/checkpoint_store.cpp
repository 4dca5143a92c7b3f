#include "storage/checkpoint_store.hpp"

#include <cstdio>
#include <cstring>

#include "runtime/digest.hpp"

namespace atl {
namespace {

constexpr char record_magic[4] = {'A', 'T', 'C', 'K'};
constexpr std::uint32_t record_version = 1;

std::string hex(std::uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}
std::string fragment_prefix(std::uint32_t f) { return "f/" + hex(f, 8) + "/r/"; }
std::string record_key(std::uint32_t f, std::uint64_t r) { return fragment_prefix(f) + hex(r, 16); }
std::string manifest_key(std::uint32_t f) { return "latest/" + hex(f, 8); }

template <class T>
void put(std::string& out, const T& v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
template <class T>
bool take(const std::string& in, std::size_t& pos, T& v) {
  if (pos + sizeof v > in.size()) return false;
  std::memcpy(&v, in.data() + pos, sizeof v);
  pos += sizeof v;
  return true;
}

// Manifest values are decimal round numbers written by commit(); anything else is corruption.
expected<std::uint64_t> parse_round(const std::string& text) {
  std::uint64_t v = 0;
  if (text.empty() || text.size() > 20) return make_error(errc::storage_failure, "corrupt manifest: '" + text + "'");
  for (char c : text) {
    if (c < '0' || c > '9') return make_error(errc::storage_failure, "corrupt manifest: '" + text + "'");
    v = v * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

std::string checkpoint_store::encode(const fragment_checkpoint& cp) {
  std::string out(record_magic, 4);
  put(out, record_version);
  put(out, cp.fragment);
  put(out, cp.round);
  put(out, cp.epoch);
  put(out, static_cast<std::uint64_t>(cp.theta.size()));
  out.append(reinterpret_cast<const char*>(cp.theta.data()), cp.theta.size() * sizeof(float));
  out.append(reinterpret_cast<const char*>(cp.momentum.data()), cp.momentum.size() * sizeof(float));
  put(out, digest64(out.data(), out.size()));
  return out;
}

expected<fragment_checkpoint> checkpoint_store::decode(const std::string& in) {
  auto corrupt = [](const std::string& why) { return make_error(errc::storage_failure, "corrupt checkpoint: " + why); };
  if (in.size() < 4 + sizeof(std::uint64_t) || std::memcmp(in.data(), record_magic, 4) != 0)
    return corrupt("bad magic");
  std::uint64_t stored_digest = 0;
  std::memcpy(&stored_digest, in.data() + in.size() - sizeof stored_digest, sizeof stored_digest);
  if (digest64(in.data(), in.size() - sizeof stored_digest) != stored_digest) return corrupt("digest mismatch");
  fragment_checkpoint cp;
  std::size_t pos = 4;
  std::uint32_t version = 0;
  std::uint64_t n = 0;
  if (!take(in, pos, version) || version != record_version) return corrupt("unknown record version");
  if (!take(in, pos, cp.fragment) || !take(in, pos, cp.round) || !take(in, pos, cp.epoch) || !take(in, pos, n))
    return corrupt("truncated header");
  if (n > (in.size() - pos) / (2 * sizeof(float))) return corrupt("sizes do not add up");
  cp.theta.resize(n);
  cp.momentum.resize(n);
  std::memcpy(cp.theta.data(), in.data() + pos, n * sizeof(float));
  std::memcpy(cp.momentum.data(), in.data() + pos + n * sizeof(float), n * sizeof(float));
  return cp;
}

status checkpoint_store::commit(const fragment_checkpoint& cp) {
  if (cp.theta.size() != cp.momentum.size())
    return make_error(errc::tensor_mismatch, "theta and momentum sizes differ");
  auto current = store_.get(column::manifest, manifest_key(cp.fragment));
  if (!current) return current.err();
  if (*current) {
    auto committed = parse_round(**current);
    if (!committed) return committed.err();
    // The same round again with the same bytes: a retry whose acknowledgement was lost (the
    // head died after the write). It is committed: say so, so the coordinator can go on.
    bool replaces = false;
    if (*committed == cp.round) {
      auto stored = latest(cp.fragment);
      if (stored && *stored && (*stored)->theta == cp.theta && (*stored)->momentum == cp.momentum) return {};
      replaces = stored && *stored && cp.epoch > (*stored)->epoch;
    }
    if (*committed >= cp.round && !replaces)
      return make_error(errc::wrong_round, "round " + std::to_string(cp.round) + " is not newer than committed " +
                                               std::to_string(*committed));
  }
  std::vector<kv_write> batch;
  batch.push_back({column::fragments, record_key(cp.fragment, cp.round), encode(cp)});
  batch.push_back({column::manifest, manifest_key(cp.fragment), std::to_string(cp.round)});
  if (cp.round >= keep_) batch.push_back({column::fragments, record_key(cp.fragment, cp.round - keep_), {}, true});
  auto result = store_.commit(batch);
  std::lock_guard<std::mutex> lock(health_mu_);
  health_.failing = static_cast<bool>(result);
  if (result) {
    health_.failed_commits++;
    health_.last_error = result.describe();
  }
  return result;
}

storage_health checkpoint_store::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return health_;
}

expected<std::optional<fragment_checkpoint>> checkpoint_store::load(std::uint32_t fragment, std::uint64_t round) const {
  auto raw = store_.get(column::fragments, record_key(fragment, round));
  if (!raw) return raw.err();
  if (!*raw) return std::optional<fragment_checkpoint>{};
  auto cp = decode(**raw);
  if (!cp) return cp.err();
  return std::optional<fragment_checkpoint>{std::move(*cp)};
}

expected<std::optional<std::uint64_t>> checkpoint_store::latest_round(std::uint32_t fragment) const {
  auto round = store_.get(column::manifest, manifest_key(fragment));
  if (!round) return round.err();
  if (!*round) return std::optional<std::uint64_t>{};
  auto r = parse_round(**round);
  if (!r) return r.err();
  return std::optional<std::uint64_t>{*r};
}

expected<std::optional<fragment_checkpoint>> checkpoint_store::latest(std::uint32_t fragment) const {
  auto round = latest_round(fragment);
  if (!round) return round.err();
  if (!*round) return std::optional<fragment_checkpoint>{};
  return load(fragment, **round);
}

expected<std::vector<checkpoint_summary>> checkpoint_store::stored_rounds() const {
  auto keys = store_.scan_keys(column::fragments, "f/");
  if (!keys) return keys.err();
  std::vector<checkpoint_summary> out;
  for (const auto& key : *keys) {
    unsigned long long f = 0, r = 0;
    if (key.size() != record_key(0, 0).size() || std::sscanf(key.c_str(), "f/%8llx/r/%16llx", &f, &r) != 2)
      return make_error(errc::storage_failure, "corrupt checkpoint key '" + key + "'");
    out.push_back({static_cast<std::uint32_t>(f), r, 0, 0, 0});
  }
  return out;
}

expected<std::vector<checkpoint_summary>> checkpoint_store::list() const {
  auto rows = store_.scan(column::fragments, "f/");
  if (!rows) return rows.err();
  std::vector<checkpoint_summary> out;
  for (const auto& [key, value] : *rows) {
    auto cp = decode(value);
    if (!cp) return make_error(cp.err().code, key + ": " + cp.err().message);
    out.push_back({cp->fragment, cp->round, cp->epoch, digest64(cp->theta.data(), cp->theta.size() * sizeof(float)),
                   cp->theta.size()});
  }
  return out;
}

}  // namespace atl
