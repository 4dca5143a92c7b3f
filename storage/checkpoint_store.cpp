#include "storage/checkpoint_store.hpp"

#include <cstdio>
#include <cstring>

#include <set>

#include "runtime/digest.hpp"
#include "storage/value_files.hpp"

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
std::string record_file(const checkpoint_view& cp) {
  return "f" + hex(cp.fragment, 8) + "-r" + hex(cp.round, 16) + "-e" + hex(cp.epoch, 16) + ".atck";
}

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

// (fragment, round) from a record key; the rest of the summary left 0.
expected<checkpoint_summary> summary_of_key(const std::string& key) {
  unsigned long long f = 0, r = 0;
  if (key.size() != record_key(0, 0).size() || std::sscanf(key.c_str(), "f/%8llx/r/%16llx", &f, &r) != 2)
    return make_error(errc::storage_failure, "corrupt checkpoint key '" + key + "'");
  return checkpoint_summary{static_cast<std::uint32_t>(f), r, 0, 0, 0};
}

// A stored value that names the file holding the record, with what list() reports about
// the round so that it reads no file: magic, epoch, digest of theta, value count, name.
constexpr char reference_magic[4] = {'A', 'T', 'C', 'F'};
struct record_reference {
  std::uint64_t epoch = 0;
  std::uint64_t digest = 0;
  std::uint64_t count = 0;
  std::string file;
};
constexpr std::size_t reference_header = 4 + 3 * sizeof(std::uint64_t);

std::string encode_reference(const record_reference& ref) {
  std::string out(reference_magic, 4);
  put(out, ref.epoch);
  put(out, ref.digest);
  put(out, ref.count);
  return out + ref.file;
}

// Empty for an inline record (or anything else that is not a reference).
std::optional<record_reference> decode_reference(const std::string& stored) {
  if (stored.size() <= reference_header || std::memcmp(stored.data(), reference_magic, 4) != 0) return std::nullopt;
  record_reference ref;
  std::size_t pos = 4;
  take(stored, pos, ref.epoch);
  take(stored, pos, ref.digest);
  take(stored, pos, ref.count);
  ref.file = stored.substr(pos);
  return ref;
}

// The file a stored value names, or empty for an inline record.
std::string file_of(const std::string& stored) {
  auto ref = decode_reference(stored);
  return ref ? ref->file : std::string();
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

checkpoint_view checkpoint_view::of(const fragment_checkpoint& cp) {
  checkpoint_view v;
  v.fragment = cp.fragment;
  v.round = cp.round;
  v.epoch = cp.epoch;
  v.theta = cp.theta.data();
  v.momentum = cp.momentum.data();
  v.count = cp.theta.size();
  return v;
}

bool checkpoint_view::same_values(const fragment_checkpoint& cp) const {
  const std::size_t bytes = count * sizeof(float);
  return cp.theta.size() == count && cp.momentum.size() == count &&
         (count == 0 ||
          (std::memcmp(cp.theta.data(), theta, bytes) == 0 && std::memcmp(cp.momentum.data(), momentum, bytes) == 0));
}

std::uint64_t checkpoint_view::digest_of_theta() const {
  return theta_digest ? *theta_digest : digest64(theta, count * sizeof(float));
}

namespace {

// A record as it lies in memory: its header, theta, momentum, then the digest of those
// three (encode() joins them; a record file is written from them as they are).
struct record_layout {
  std::string header;
  std::uint64_t digest = 0;

  explicit record_layout(const checkpoint_view& cp) {
    header.append(record_magic, 4);
    put(header, record_version);
    put(header, cp.fragment);
    put(header, cp.round);
    put(header, cp.epoch);
    put(header, static_cast<std::uint64_t>(cp.count));
    digest_stream d;
    for (const auto& p : values(cp)) d.update(p.data, p.size);
    digest = d.finish();
  }
  // Header, theta, momentum: what the digest covers.
  std::vector<value_files::piece> values(const checkpoint_view& cp) const {
    const std::size_t bytes = cp.count * sizeof(float);
    return {{header.data(), header.size()}, {cp.theta, bytes}, {cp.momentum, bytes}};
  }
  std::vector<value_files::piece> pieces(const checkpoint_view& cp) const {
    auto all = values(cp);
    all.push_back({&digest, sizeof digest});
    return all;
  }
};

}  // namespace

std::string checkpoint_store::encode(const checkpoint_view& cp) {
  const record_layout record(cp);
  std::string out;
  for (const auto& p : record.pieces(cp)) out.append(static_cast<const char*>(p.data), p.size);
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
  return commit(checkpoint_view::of(cp));
}

status checkpoint_store::commit(const checkpoint_view& cp) {
  auto result = commit_keeping_files(cp);
  remove_unnamed_files();
  return result;
}

status checkpoint_store::commit_keeping_files(const checkpoint_view& cp) {
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
      if (stored && *stored && cp.same_values(**stored)) return {};
      replaces = stored && *stored && cp.epoch > (*stored)->epoch;
    }
    if (*committed >= cp.round && !replaces)
      return make_error(errc::wrong_round, "round " + std::to_string(cp.round) + " is not newer than committed " +
                                               std::to_string(*committed));
  }
  auto result = write_and_commit(cp);
  std::lock_guard<std::mutex> lock(health_mu_);
  health_.failing = static_cast<bool>(result);
  if (result) {
    health_.failed_commits++;
    health_.last_error = result.describe();
  }
  return result;
}

status checkpoint_store::write_and_commit(const checkpoint_view& cp) {
  if (!store_.writable()) return make_error(errc::storage_failure, "commit: the store is open read-only");
  const std::string dir = store_.files_dir();
  std::string value;
  if (dir.empty()) {
    value = encode(cp);
  } else {
    auto reference = write_record_file(cp);
    if (!reference) return reference.err();
    value = std::move(*reference);
  }
  // Files the batch leaves unnamed: the pruned round's, and a replaced record's (the
  // same round from an older epoch).
  std::vector<std::string> unnamed;
  for (std::uint64_t r : {cp.round, cp.round - keep_}) {
    if (r > cp.round) continue;  // round < keep_: nothing pruned
    auto old = store_.get(column::fragments, record_key(cp.fragment, r));
    if (old && *old && !file_of(**old).empty() && **old != value) unnamed.push_back(file_of(**old));
  }
  std::vector<kv_write> batch;
  batch.push_back({column::fragments, record_key(cp.fragment, cp.round), value});
  batch.push_back({column::manifest, manifest_key(cp.fragment), std::to_string(cp.round)});
  if (cp.round >= keep_) batch.push_back({column::fragments, record_key(cp.fragment, cp.round - keep_), {}, true});
  if (auto err = store_.commit(batch)) {
    if (!dir.empty()) value_files::remove(dir, file_of(value));  // named by nothing
    return err;
  }
  for (auto& name : unnamed) unnamed_files_.push_back({cp.fragment, std::move(name)});
  committed_ = true;
  return {};
}

void checkpoint_store::remove_unnamed_files() {
  const std::string dir = store_.files_dir();
  if (dir.empty()) return;
  for (auto& [fragment, name] : unnamed_files_) {
    auto& spare = spare_files_[fragment];
    if (spare.empty()) spare = std::move(name);  // the fragment's next record overwrites it
    else value_files::remove(dir, name);
  }
  unnamed_files_.clear();
  if (committed_ && !swept_) sweep_unlisted_files();
}

expected<std::string> checkpoint_store::write_record_file(const checkpoint_view& cp) {
  const auto name = record_file(cp);
  const record_layout record(cp);
  std::string spare;
  if (auto it = spare_files_.find(cp.fragment); it != spare_files_.end()) {
    spare = std::move(it->second);  // reused or removed by the write
    spare_files_.erase(it);
  }
  if (auto err = value_files::write_durably(store_.files_dir(), name, record.pieces(cp), spare)) return err;
  return encode_reference({cp.epoch, cp.digest_of_theta(), cp.count, name});
}

expected<std::string> checkpoint_store::record_bytes(const std::string& stored) const {
  const auto name = file_of(stored);
  if (name.empty()) return stored;
  if (name.find('/') != std::string::npos || store_.files_dir().empty())
    return make_error(errc::storage_failure, "corrupt checkpoint reference '" + name + "'");
  return value_files::read(store_.files_dir(), name);
}

void checkpoint_store::sweep_unlisted_files() {
  swept_ = true;
  auto rows = store_.scan(column::fragments, "f/");
  if (!rows) return;
  std::set<std::string> named;
  for (const auto& [key, value] : *rows)
    if (auto name = file_of(value); !name.empty()) named.insert(name);
  for (const auto& [fragment, name] : spare_files_) named.insert(name);
  value_files::remove_unlisted(store_.files_dir(), named);
}

storage_health checkpoint_store::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return health_;
}

expected<std::optional<fragment_checkpoint>> checkpoint_store::load(std::uint32_t fragment, std::uint64_t round) const {
  auto raw = store_.get(column::fragments, record_key(fragment, round));
  if (!raw) return raw.err();
  if (!*raw) return std::optional<fragment_checkpoint>{};
  auto bytes = record_bytes(**raw);
  if (!bytes) return bytes.err();
  auto cp = decode(*bytes);
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
    auto summary = summary_of_key(key);
    if (!summary) return summary.err();
    out.push_back(*summary);
  }
  return out;
}

expected<std::vector<checkpoint_summary>> checkpoint_store::list() const {
  auto rows = store_.scan(column::fragments, "f/");
  if (!rows) return rows.err();
  std::vector<checkpoint_summary> out;
  for (const auto& [key, value] : *rows) {
    auto summary = summary_of_key(key);
    if (!summary) return summary.err();
    if (auto ref = decode_reference(value)) {
      summary->epoch = ref->epoch;
      summary->digest = ref->digest;
      summary->params = ref->count;
      out.push_back(*summary);
      continue;
    }
    auto cp = decode(value);  // inline: written before value files, or by the memory store
    if (!cp) return make_error(cp.err().code, key + ": " + cp.err().message);
    out.push_back({cp->fragment, cp->round, cp->epoch, digest64(cp->theta.data(), cp->theta.size() * sizeof(float)),
                   cp->theta.size()});
  }
  return out;
}

}  // namespace atl
