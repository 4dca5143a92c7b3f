#include "storage/checkpoint_store.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <set>

#include "runtime/core/digest.hpp"
#include "runtime/process/config.hpp"
#include "runtime/process/fault_point.hpp"
#include "storage/binary_fields.hpp"
#include "storage/value_files.hpp"

namespace atl {
namespace {

constexpr char record_magic[4] = {'A', 'T', 'C', 'K'};
// 1: theta and momentum; 2: a residual count (0 or the value count), then the residual.
constexpr std::uint32_t record_version = 2;
constexpr char snapshot_kind = 'r', log_kind = 'l';
std::string hex(std::uint64_t v, int width) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%0*llx", width, static_cast<unsigned long long>(v));
  return buf;
}
std::string fragment_keys(std::uint32_t f) { return "f/" + hex(f, 8) + "/"; }
std::string key_of(char kind, std::uint32_t f, std::uint64_t r) { return fragment_keys(f) + kind + "/" + hex(r, 16); }
std::string record_key(std::uint32_t f, std::uint64_t r) { return key_of(snapshot_kind, f, r); }
std::string log_key(std::uint32_t f, std::uint64_t r) { return key_of(log_kind, f, r); }
std::string manifest_key(std::uint32_t f) { return "latest/" + hex(f, 8); }
std::string value_file(char kind, std::uint32_t f, std::uint64_t r, std::uint64_t epoch) {
  return "f" + hex(f, 8) + "-r" + hex(r, 16) + "-e" + hex(epoch, 16) + (kind == log_kind ? ".atrl" : ".atck");
}

using binary_fields::put;
using binary_fields::take;

// A key of column `fragments`: which fragment and round, and a snapshot's or a record's.
struct parsed_key {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  char kind = snapshot_kind;
};

expected<parsed_key> parse_key(const std::string& key) {
  unsigned long long f = 0, r = 0;
  char kind = 0;
  if (key.size() != record_key(0, 0).size() || std::sscanf(key.c_str(), "f/%8llx/%c/%16llx", &f, &kind, &r) != 3 ||
      (kind != snapshot_kind && kind != log_kind))
    return make_error(errc::storage_failure, "corrupt checkpoint key '" + key + "'");
  return parsed_key{static_cast<std::uint32_t>(f), r, kind};
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
  v.residual = cp.residual.empty() ? nullptr : cp.residual.data();
  v.count = cp.theta.size();
  return v;
}

std::uint64_t checkpoint_view::digest_of_theta() const {
  return theta_digest ? *theta_digest : digest64(theta, count * sizeof(float));
}

namespace {

// A record as it lies in memory: its header, theta, momentum, residual, then the digest of
// those (encode() joins them; a record file is written from them as they are).
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
    put(header, static_cast<std::uint64_t>(cp.residual ? cp.count : 0));
    digest_stream d;
    for (const auto& p : values(cp)) d.update(p.data, p.size);
    digest = d.finish();
  }
  // Header, theta, momentum, residual: what the digest covers.
  std::vector<value_files::piece> values(const checkpoint_view& cp) const {
    const std::size_t bytes = cp.count * sizeof(float);
    return {{header.data(), header.size()},
            {cp.theta, bytes},
            {cp.momentum, bytes},
            {cp.residual, cp.residual ? bytes : 0}};
  }
  std::vector<value_files::piece> pieces(const checkpoint_view& cp) const {
    auto all = values(cp);
    all.push_back({&digest, sizeof digest});
    return all;
  }
};

}  // namespace

namespace {

// Takes a spare file of a fragment's kind of value, if any (reused or removed by the write).
std::string take_spare(std::map<std::pair<std::uint32_t, char>, std::vector<std::string>>& spares, std::uint32_t f,
                       char kind) {
  std::string spare;
  if (auto it = spares.find({f, kind}); it != spares.end() && !it->second.empty()) {
    spare = std::move(it->second.back());
    it->second.pop_back();
  }
  return spare;
}

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
  std::uint64_t n = 0, residual = 0;
  if (!take(in, pos, version) || (version != 1 && version != record_version)) return corrupt("unknown record version");
  if (!take(in, pos, cp.fragment) || !take(in, pos, cp.round) || !take(in, pos, cp.epoch) || !take(in, pos, n))
    return corrupt("truncated header");
  if (version >= 2 && !take(in, pos, residual)) return corrupt("truncated header");
  const std::size_t values = in.size() - sizeof stored_digest - pos;
  if (n > values / (2 * sizeof(float)) || (residual != 0 && residual != n) ||
      values != (2 * n + residual) * sizeof(float))
    return corrupt("sizes do not add up");
  auto copy_out = [&](std::vector<float>& to, std::uint64_t count) {
    to.resize(count);
    if (count) std::memcpy(to.data(), in.data() + pos, count * sizeof(float));
    pos += count * sizeof(float);
  };
  copy_out(cp.theta, n);
  copy_out(cp.momentum, n);
  copy_out(cp.residual, residual);
  return cp;
}

status checkpoint_store::commit(const fragment_checkpoint& cp) {
  if (cp.theta.size() != cp.momentum.size())
    return make_error(errc::tensor_mismatch, "theta and momentum sizes differ");
  if (!cp.residual.empty() && cp.residual.size() != cp.theta.size())
    return make_error(errc::tensor_mismatch, "theta and residual sizes differ");
  return commit(checkpoint_view::of(cp));
}

log_options log_options_for(const run_config& run) {
  log_options o;
  o.sync = run.sync == "fsync" ? sync_mode::fsync : sync_mode::replicated;
  o.snapshot_every = static_cast<std::uint64_t>(run.snapshot_every);
  return o;
}

status checkpoint_store::commit(const checkpoint_view& cp) {
  auto result = commit_keeping_files(cp);
  remove_unnamed_files();
  return result;
}

status checkpoint_store::commit_keeping_files(const checkpoint_view& cp) {
  auto committed = latest_round(cp.fragment);
  if (!committed) return committed.err();
  std::vector<std::string> erase;
  if (*committed) {
    // The same round again with the same bytes: a retry whose acknowledgement was lost (the
    // head died after the write). It is committed: say so, so the coordinator can go on.
    bool replaces = false;
    if (**committed == cp.round) {
      auto stored = summary(cp.fragment, cp.round);
      if (!stored) return stored.err();
      if (*stored && (*stored)->digest == cp.digest_of_theta() && (*stored)->params == cp.count) return {};
      replaces = *stored && cp.epoch > (*stored)->epoch;
      if (replaces) erase.push_back(log_key(cp.fragment, cp.round));  // the replaced round's record
    }
    if (**committed >= cp.round && !replaces)
      return make_error(errc::wrong_round, "round " + std::to_string(cp.round) + " is not newer than committed " +
                                               std::to_string(**committed));
  }
  auto result = write_and_commit(cp, true, std::move(erase));
  note_health(result);
  return result;
}

status checkpoint_store::snapshot_keeping_files(const checkpoint_view& cp) {
  auto job = reserve_snapshot(cp);
  if (!job) return job.err();
  (*job)->write();
  return end_snapshot(**job);
}

expected<std::shared_ptr<snapshot_job>> checkpoint_store::begin_snapshot(fragment_checkpoint state,
                                                                         std::optional<std::uint64_t> theta_digest) {
  if (state.theta.size() != state.momentum.size() ||
      (!state.residual.empty() && state.residual.size() != state.theta.size()))
    return make_error(errc::tensor_mismatch, "a snapshot's theta, momentum and residual sizes differ");
  auto view = checkpoint_view::of(state);
  view.theta_digest = theta_digest;
  auto job = reserve_snapshot(view);
  if (!job) return job;
  (*job)->owned_ = std::move(state);
  (*job)->view_ = checkpoint_view::of((*job)->owned_);
  (*job)->view_.theta_digest = (*job)->digest_;
  return job;
}

expected<std::shared_ptr<snapshot_job>> checkpoint_store::reserve_snapshot(const checkpoint_view& cp) {
  auto committed = latest_round(cp.fragment);
  if (!committed) return committed.err();
  if (!*committed || **committed < cp.round)
    return make_error(errc::wrong_round, "a snapshot of round " + std::to_string(cp.round) + " of fragment " +
                                             std::to_string(cp.fragment) + ", which this store does not hold");
  if (!store_.writable()) return make_error(errc::storage_failure, "snapshot: the store is open read-only");
  auto job = std::make_shared<snapshot_job>();
  job->view_ = cp;
  job->digest_ = cp.digest_of_theta();
  job->view_.theta_digest = job->digest_;
  job->dir_ = store_.files_dir();
  if (!job->dir_.empty()) {
    job->name_ = value_file(snapshot_kind, cp.fragment, cp.round, cp.epoch);
    job->spare_ = take_spare(spare_files_, cp.fragment, snapshot_kind);
    // The writer writes NAME.tmp (the spare renamed, or a new file), then renames it.
    snapshots_in_flight_.insert({job->name_, job->name_ + ".tmp"});
    if (!job->spare_.empty()) snapshots_in_flight_.insert(job->spare_);
  }
  return job;
}

void snapshot_job::write() {
  if (dir_.empty()) return;  // an inline value: end_snapshot encodes it
  const record_layout record(view_);
  written_ = value_files::write_durably(dir_, name_, record.pieces(view_), spare_);
}

status checkpoint_store::end_snapshot(snapshot_job& job) {
  snapshots_in_flight_.erase(job.name_);
  snapshots_in_flight_.erase(job.name_ + ".tmp");
  snapshots_in_flight_.erase(job.spare_);
  const auto& cp = job.view_;
  if (job.written_) {
    note_health(job.written_);
    return job.written_;
  }
  const auto drop = [&](status why) {
    if (!job.dir_.empty()) value_files::remove(job.dir_, job.name_);
    return why;
  };
  // The round may have been replaced meanwhile (a successor coordinator redoing it with
  // other bytes): this snapshot is then of a state no longer stored.
  auto stored = summary(cp.fragment, cp.round);
  if (!stored) return drop(stored.err());
  if (!*stored || (*stored)->digest != job.digest_)
    return drop(make_error(errc::wrong_round, "round " + std::to_string(cp.round) + " of fragment " +
                                                  std::to_string(cp.fragment) +
                                                  " was replaced or pruned while its snapshot was written"));
  const std::string value =
      job.dir_.empty() ? encode(cp) : encode_reference({cp.epoch, job.digest_, cp.count, job.name_});
  auto result = write_batch(cp.fragment, cp.round, record_key(cp.fragment, cp.round), value, false, true);
  note_health(result);
  return result;
}

status checkpoint_store::append_keeping_files(const round_record& record) {
  const auto f = record.fragment;
  const auto r = record.round;
  auto committed = latest_round(f);
  if (!committed) return committed.err();
  if (!*committed)
    return make_error(errc::not_ready, "no committed state of fragment " + std::to_string(f) + " to apply round " +
                                           std::to_string(r) + " to");
  std::vector<std::string> erase;
  if (**committed == r) {
    auto stored = summary(f, r);
    if (!stored) return stored.err();
    if (*stored && (*stored)->digest == record.theta_digest) return {};  // a retry
    if (!*stored || record.epoch <= (*stored)->epoch)
      return make_error(errc::wrong_round,
                        "round " + std::to_string(r) + " is not newer than committed " + std::to_string(**committed));
    // A successor coordinator redoing a round that its predecessor left on some keepers only.
    const auto no_base =
        make_error(errc::not_ready, "round " + std::to_string(r) + " of fragment " + std::to_string(f) +
                                        " replaces one whose predecessor is not stored here");
    if (r == 0) return no_base;
    auto base = summary(f, r - 1);
    if (!base) return base.err();
    if (!*base) return no_base;
    erase.push_back(record_key(f, r));  // a snapshot of the replaced round
  } else if (**committed + 1 != r) {
    if (**committed > r)
      return make_error(errc::wrong_round,
                        "round " + std::to_string(r) + " is not newer than committed " + std::to_string(**committed));
    return make_error(errc::not_ready, "fragment " + std::to_string(f) + " is at round " + std::to_string(**committed) +
                                           " here; round " + std::to_string(r) + " needs round " +
                                           std::to_string(r - 1));
  }
  if (auto err = check_record(record)) return err;
  auto result = [&]() -> status {
    if (!store_.writable()) return make_error(errc::storage_failure, "append: the store is open read-only");
    const bool sync = options_.sync == sync_mode::fsync;
    std::string value;
    if (store_.files_dir().empty()) {
      value = encoded_record(record).joined();
    } else {
      auto reference = write_log_file(record);
      if (!reference) return reference.err();
      value = std::move(*reference);
      if (r > 0) ATL_FAULT_POINT("keeper.appending");  // the record's file is written, its key is not
    }
    return write_batch(f, r, log_key(f, r), value, true, sync, std::move(erase));
  }();
  note_health(result);
  if (!result) {
    std::lock_guard<std::mutex> lock(health_mu_);
    health_.logged_bytes += record.input_bytes();
    health_.logged_records++;
  }
  return result;
}

void checkpoint_store::note_health(const status& result) {
  std::lock_guard<std::mutex> lock(health_mu_);
  health_.failing = static_cast<bool>(result);
  if (result) {
    health_.failed_commits++;
    health_.last_error = result.describe();
  }
}

status checkpoint_store::write_and_commit(const checkpoint_view& cp, bool move_manifest,
                                          std::vector<std::string> erase) {
  if (!store_.writable()) return make_error(errc::storage_failure, "commit: the store is open read-only");
  std::string value;
  if (store_.files_dir().empty()) {
    value = encode(cp);
  } else {
    auto reference = write_record_file(cp);
    if (!reference) return reference.err();
    value = std::move(*reference);
  }
  return write_batch(cp.fragment, cp.round, record_key(cp.fragment, cp.round), value, move_manifest, true,
                     std::move(erase));
}

status checkpoint_store::write_batch(std::uint32_t fragment, std::uint64_t round, const std::string& key,
                                     const std::string& value, bool move_manifest, bool sync,
                                     std::vector<std::string> erase) {
  const std::string dir = store_.files_dir();
  std::uint64_t latest = round;
  if (!move_manifest) {
    auto committed = latest_round(fragment);
    if (!committed) return committed.err();
    if (*committed) latest = **committed;
  }
  auto pruned = prunable(fragment, latest, key);
  if (!pruned) return pruned.err();
  for (auto& k : *pruned)
    if (k != key) erase.push_back(std::move(k));
  // Files the batch leaves unnamed: the pruned rounds', and a replaced value's (the same
  // round from an older epoch).
  std::vector<std::pair<std::pair<std::uint32_t, char>, std::string>> unnamed;
  auto note_file = [&](const std::string& k) {
    auto old = store_.get(column::fragments, k);
    auto parsed = parse_key(k);
    if (old && *old && parsed && !file_of(**old).empty() && **old != value)
      unnamed.push_back({{fragment, parsed->kind}, file_of(**old)});
  };
  note_file(key);
  std::vector<kv_write> batch;
  batch.push_back({column::fragments, key, value});
  if (move_manifest) batch.push_back({column::manifest, manifest_key(fragment), std::to_string(round)});
  for (const auto& k : erase) {
    note_file(k);
    batch.push_back({column::fragments, k, {}, true});
  }
  if (auto err = store_.commit(batch, sync)) {
    if (!dir.empty()) value_files::remove(dir, file_of(value));  // named by nothing
    return err;
  }
  for (auto& u : unnamed) unnamed_files_.push_back(std::move(u));
  committed_ = true;
  return {};
}

expected<std::vector<std::string>> checkpoint_store::prunable(std::uint32_t fragment, std::uint64_t latest,
                                                              const std::string& adding) const {
  auto keys = store_.scan_keys(column::fragments, fragment_keys(fragment));
  if (!keys) return keys.err();
  if (std::find(keys->begin(), keys->end(), adding) == keys->end()) keys->push_back(adding);
  // The oldest round that stays readable, and the newest snapshot at or before it: what
  // replays it. Without one, nothing can go.
  const std::uint64_t oldest = latest + 1 >= keep_ ? latest + 1 - keep_ : 0;
  std::optional<std::uint64_t> base;
  for (const auto& k : *keys) {
    auto parsed = parse_key(k);
    if (!parsed) return parsed.err();
    if (parsed->kind == snapshot_kind && parsed->round <= oldest && (!base || parsed->round > *base))
      base = parsed->round;
  }
  std::vector<std::string> out;
  if (!base) return out;
  for (const auto& k : *keys) {
    auto parsed = parse_key(k);
    const bool before_base = parsed->round < *base || (parsed->kind == log_kind && parsed->round == *base);
    if (before_base) out.push_back(k);
  }
  return out;
}

void checkpoint_store::remove_unnamed_files() {
  const std::string dir = store_.files_dir();
  if (dir.empty()) return;
  for (auto& [slot, name] : unnamed_files_) {
    auto& spares = spare_files_[slot];
    if (spares.size() < spares_kept(slot.second)) spares.push_back(std::move(name));  // overwritten next
    else value_files::remove(dir, name);
  }
  unnamed_files_.clear();
  if (committed_ && !swept_) sweep_unlisted_files();
}

std::size_t checkpoint_store::spares_kept(char kind) const {
  return kind == log_kind ? static_cast<std::size_t>(std::min<std::uint64_t>(options_.snapshot_every, 64)) + 1 : 1;
}

expected<std::string> checkpoint_store::write_record_file(const checkpoint_view& cp) {
  const auto name = value_file(snapshot_kind, cp.fragment, cp.round, cp.epoch);
  const record_layout record(cp);
  const auto spare = take_spare(spare_files_, cp.fragment, snapshot_kind);
  if (auto err = value_files::write_durably(store_.files_dir(), name, record.pieces(cp), spare)) return err;
  return encode_reference({cp.epoch, cp.digest_of_theta(), cp.count, name});
}

expected<std::string> checkpoint_store::write_log_file(const round_record& record) {
  const auto name = value_file(log_kind, record.fragment, record.round, record.epoch);
  const encoded_record encoded(record);
  std::vector<value_files::piece> pieces;
  for (const auto& p : encoded.pieces()) pieces.push_back({p.data, p.size});
  const auto spare = take_spare(spare_files_, record.fragment, log_kind);
  if (auto err = value_files::write(store_.files_dir(), name, pieces, spare, options_.sync == sync_mode::fsync))
    return err;
  return encode_reference({record.epoch, record.theta_digest, record.count, name});
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
  for (const auto& [slot, names] : spare_files_) named.insert(names.begin(), names.end());
  named.insert(snapshots_in_flight_.begin(), snapshots_in_flight_.end());
  value_files::remove_unlisted(store_.files_dir(), named);
}

void checkpoint_store::note_replay_mismatch() {
  std::lock_guard<std::mutex> lock(health_mu_);
  health_.replay_mismatches++;
}

storage_health checkpoint_store::health() const {
  std::lock_guard<std::mutex> lock(health_mu_);
  return health_;
}

namespace {

// The summary of one stored value (snapshot or round record) without reading a value file
// when it is a reference.
expected<checkpoint_summary> summary_of(const parsed_key& key, const std::string& value) {
  if (auto ref = decode_reference(value))
    return checkpoint_summary{key.fragment, key.round, ref->epoch, ref->digest, ref->count};
  if (key.kind == log_kind) {
    auto record = decode_record(value);
    if (!record) return record.err();
    return checkpoint_summary{key.fragment, key.round, record->epoch, record->theta_digest, record->count};
  }
  auto cp = checkpoint_store::decode(value);  // inline: written before value files, or by the memory store
  if (!cp) return cp.err();
  return checkpoint_summary{cp->fragment, cp->round, cp->epoch,
                            digest64(cp->theta.data(), cp->theta.size() * sizeof(float)), cp->theta.size()};
}

}  // namespace

expected<std::optional<checkpoint_summary>> checkpoint_store::summary(std::uint32_t fragment,
                                                                      std::uint64_t round) const {
  for (char kind : {snapshot_kind, log_kind}) {
    auto raw = store_.get(column::fragments, key_of(kind, fragment, round));
    if (!raw) return raw.err();
    if (!*raw) continue;
    auto s = summary_of(parsed_key{fragment, round, kind}, **raw);
    if (!s) return s.err();
    return std::optional<checkpoint_summary>{*s};
  }
  return std::optional<checkpoint_summary>{};
}

expected<std::optional<fragment_checkpoint>> checkpoint_store::load(std::uint32_t fragment, std::uint64_t round) const {
  auto read_snapshot = [&](std::uint64_t r) -> expected<std::optional<fragment_checkpoint>> {
    auto raw = store_.get(column::fragments, record_key(fragment, r));
    if (!raw) return raw.err();
    if (!*raw) return std::optional<fragment_checkpoint>{};
    auto bytes = record_bytes(**raw);
    if (!bytes) return bytes.err();
    auto cp = decode(*bytes);
    if (!cp) return cp.err();
    return std::optional<fragment_checkpoint>{std::move(*cp)};
  };
  auto exact = read_snapshot(round);
  if (!exact || *exact) return exact;
  auto raw = store_.get(column::fragments, log_key(fragment, round));
  if (!raw) return raw.err();
  if (!*raw) return std::optional<fragment_checkpoint>{};
  // Replay: the newest snapshot before `round`, then every record after it.
  auto keys = store_.scan_keys(column::fragments, fragment_keys(fragment));
  if (!keys) return keys.err();
  std::optional<std::uint64_t> base;
  for (const auto& k : *keys) {
    auto parsed = parse_key(k);
    if (!parsed) return parsed.err();
    if (parsed->kind == snapshot_kind && parsed->round < round && (!base || parsed->round > *base))
      base = parsed->round;
  }
  auto where = [&](std::uint64_t r) { return "fragment " + std::to_string(fragment) + " round " + std::to_string(r); };
  if (!base) return make_error(errc::storage_failure, where(round) + ": no snapshot before it to replay the log onto");
  auto state = read_snapshot(*base);
  if (!state) return state.err();
  if (!*state) return make_error(errc::storage_failure, where(*base) + ": the snapshot vanished");
  fragment_checkpoint cp = std::move(**state);
  outer_state outer{std::move(cp.theta), std::move(cp.momentum), std::move(cp.residual)};
  record_scratch scratch;
  for (std::uint64_t r = *base + 1; r <= round; ++r) {
    auto stored = store_.get(column::fragments, log_key(fragment, r));
    if (!stored) return stored.err();
    if (!*stored) return make_error(errc::storage_failure, where(r) + " is missing from the log");
    auto bytes = record_bytes(**stored);
    if (!bytes) return bytes.err();
    auto record = decode_record(*bytes);
    if (!record) return make_error(record.err().code, where(r) + ": " + record.err().message);
    if (record->fragment != fragment || record->round != r)
      return make_error(errc::storage_failure, where(r) + ": the record names another round");
    if (auto err = apply_record(*record, outer, scratch)) return make_error(err.code, where(r) + ": " + err.message);
    cp.epoch = record->epoch;
  }
  cp.round = round;
  cp.theta = std::move(outer.theta);
  cp.momentum = std::move(outer.momentum);
  cp.residual = std::move(outer.residual);
  return std::optional<fragment_checkpoint>{std::move(cp)};
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
  std::set<std::pair<std::uint32_t, std::uint64_t>> rounds;  // a snapshot and a record of one round: once
  for (const auto& key : *keys) {
    auto parsed = parse_key(key);
    if (!parsed) return parsed.err();
    rounds.insert({parsed->fragment, parsed->round});
  }
  std::vector<checkpoint_summary> out;
  for (const auto& [fragment, round] : rounds) out.push_back({fragment, round, 0, 0, 0});
  return out;
}

expected<std::vector<checkpoint_summary>> checkpoint_store::list() const {
  auto rows = store_.scan(column::fragments, "f/");
  if (!rows) return rows.err();
  std::map<std::pair<std::uint32_t, std::uint64_t>, checkpoint_summary> by_round;
  for (const auto& [key, value] : *rows) {
    auto parsed = parse_key(key);
    if (!parsed) return parsed.err();
    if (by_round.count({parsed->fragment, parsed->round})) continue;
    auto summary = summary_of(*parsed, value);
    if (!summary) return make_error(summary.err().code, key + ": " + summary.err().message);
    by_round.emplace(std::make_pair(parsed->fragment, parsed->round), *summary);
  }
  std::vector<checkpoint_summary> out;
  for (auto& [_, s] : by_round) out.push_back(s);
  return out;
}

expected<std::vector<fragment_storage>> checkpoint_store::storage_use() const {
  auto rows = store_.scan(column::fragments, "f/");
  if (!rows) return rows.err();
  std::map<std::uint32_t, fragment_storage> by_fragment;
  for (const auto& [key, value] : *rows) {
    auto parsed = parse_key(key);
    if (!parsed) return parsed.err();
    auto& use = by_fragment[parsed->fragment];
    use.fragment = parsed->fragment;
    (parsed->kind == log_kind ? use.log_records : use.snapshots)++;
    const auto name = file_of(value);
    std::error_code ec;
    const auto size = name.empty() ? value.size() : std::filesystem::file_size(store_.files_dir() + "/" + name, ec);
    if (!ec) use.bytes += size;
  }
  std::vector<fragment_storage> out;
  for (auto& [_, use] : by_fragment) out.push_back(use);
  return out;
}

}  // namespace atl
