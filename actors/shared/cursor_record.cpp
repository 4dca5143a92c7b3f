#include "actors/shared/cursor_record.hpp"

#include <cstdio>
#include <cstring>
#include <set>

#include "runtime/core/digest.hpp"
#include "storage/binary_fields.hpp"

namespace atl {
namespace {

using binary_fields::put;
using binary_fields::take;
using data::chunk_id;
using data::consumption;
using data::cursor_snapshot;
using data::span;

constexpr char magic[4] = {'A', 'T', 'D', 'C'};
// 2: each chunk's gone epoch, and each fragment's commit epoch after the commits. A
// record of version 1 (before them) reads as all 0: chunks of gone holders settle as then.
constexpr std::uint32_t version = 2;

void put_string(std::string& out, const std::string& s) {
  put(out, static_cast<std::uint32_t>(s.size()));
  out += s;
}
void put_chunk(std::string& out, chunk_id id) {
  put(out, id.epoch);
  put(out, id.index);
}
void put_span(std::string& out, span s) {
  put(out, s.begin);
  put(out, s.end);
}
void put_spans(std::string& out, const std::vector<span>& spans) {
  put(out, static_cast<std::uint32_t>(spans.size()));
  for (const auto& s : spans) put_span(out, s);
}
void put_names(std::string& out, const std::vector<std::string>& names) {
  put(out, static_cast<std::uint32_t>(names.size()));
  for (const auto& n : names) put_string(out, n);
}

// Reads fields up to `end`, refusing a count whose items could not fit in the bytes left.
class reader {
 public:
  reader(const std::string& in, std::size_t pos, std::size_t end) : in_(in), pos_(pos), end_(end) {}
  template <class T>
  bool field(T& v) {
    return pos_ + sizeof v <= end_ && take(in_, pos_, v);
  }
  bool count(std::uint32_t& n, std::size_t min_item_bytes) {
    return field(n) && static_cast<std::size_t>(n) * min_item_bytes <= end_ - pos_;
  }
  bool string(std::string& s) {
    std::uint32_t n = 0;
    if (!count(n, 1)) return false;
    s.assign(in_, pos_, n);
    pos_ += n;
    return true;
  }
  bool chunk(chunk_id& id) { return field(id.epoch) && field(id.index); }
  bool one_span(span& s) { return field(s.begin) && field(s.end); }
  bool spans(std::vector<span>& out) {
    std::uint32_t n = 0;
    if (!count(n, 2 * sizeof(std::uint64_t))) return false;
    out.resize(n);
    for (auto& s : out)
      if (!one_span(s)) return false;
    return true;
  }
  bool names(std::vector<std::string>& out) {
    std::uint32_t n = 0;
    if (!count(n, sizeof(std::uint32_t))) return false;
    out.resize(n);
    for (auto& s : out)
      if (!string(s)) return false;
    return true;
  }
  bool at_end() const { return pos_ == end_; }

 private:
  const std::string& in_;
  std::size_t pos_, end_;
};

// The record's first fields: magic, version, config, lease position.
std::string record_start(const data::cursor_config& config, std::uint64_t lease_epoch, std::uint64_t next_fresh) {
  std::string out(magic, sizeof magic);
  put(out, version);
  put(out, config.units);
  put(out, config.chunk);
  put(out, config.fragments);
  put(out, config.epochs);
  put(out, lease_epoch);
  put(out, next_fresh);
  return out;
}

void put_chunk_entry(std::string& out, const cursor_snapshot::chunk_entry& c) {
  put_chunk(out, c.id);
  put(out, static_cast<std::uint8_t>(c.state));
  put_string(out, c.holder);
  put(out, static_cast<std::uint8_t>(c.holder_gone));
  put(out, c.gone_epoch);
  put(out, static_cast<std::uint32_t>(c.tied.size()));
  for (std::size_t f = 0; f < c.tied.size(); ++f) {
    put_spans(out, c.tied[f]);
    put_spans(out, f < c.consumed.size() ? c.consumed[f] : std::vector<span>{});
  }
  put(out, static_cast<std::uint32_t>(c.ledger.size()));
  for (const auto& l : c.ledger) {
    put(out, l.fragment);
    put(out, l.round);
    put_span(out, l.positions);
  }
}

}  // namespace

std::string encode_cursor(const cursor_snapshot& snap) {
  auto out = record_start(snap.config, snap.lease_epoch, snap.next_fresh);
  put(out, static_cast<std::uint32_t>(snap.chunks.size()));
  for (const auto& c : snap.chunks) put_chunk_entry(out, c);
  put(out, static_cast<std::uint32_t>(snap.returned.size()));
  for (const auto& id : snap.returned) put_chunk(out, id);
  put(out, static_cast<std::uint32_t>(snap.ties.size()));
  for (const auto& t : snap.ties) {
    put_string(out, t.worker);
    put(out, t.fragment);
    put(out, t.round);
    put_chunk(out, t.chunk);
    put_span(out, t.positions);
    put(out, static_cast<std::uint8_t>(t.missed_once));
  }
  put(out, static_cast<std::uint32_t>(snap.recent.size()));
  for (const auto& r : snap.recent) {
    put(out, r.fragment);
    put(out, r.round);
    put_names(out, r.taken);
    put_names(out, r.late);
  }
  put(out, static_cast<std::uint32_t>(snap.commit_epochs.size()));
  for (const auto e : snap.commit_epochs) put(out, e);
  put(out, digest64(out.data(), out.size()));
  return out;
}

expected<cursor_snapshot> decode_cursor(const std::string& in) {
  const auto corrupt = [](const std::string& why) {
    return make_error(errc::storage_failure, "corrupt data cursor record: " + why);
  };
  std::uint64_t stored = 0;
  if (in.size() < sizeof magic + sizeof version + sizeof stored || std::memcmp(in.data(), magic, sizeof magic) != 0)
    return corrupt("bad magic");
  const std::size_t end = in.size() - sizeof stored;
  std::memcpy(&stored, in.data() + end, sizeof stored);
  if (digest64(in.data(), end) != stored)
    return make_error(errc::checksum_mismatch, "data cursor record: the checksum does not match its bytes");
  reader r(in, sizeof magic, end);
  std::uint32_t v = 0, n = 0;
  if (!r.field(v) || v < 1 || v > version) return corrupt("unknown version");
  cursor_snapshot snap;
  if (!r.field(snap.config.units) || !r.field(snap.config.chunk) || !r.field(snap.config.fragments) ||
      !r.field(snap.config.epochs) || !r.field(snap.lease_epoch) || !r.field(snap.next_fresh))
    return corrupt("truncated header");
  // a chunk: id, state, holder, gone (and its epoch, from version 2), fragment count, ledger count
  const std::size_t min_chunk = 2 * sizeof(std::uint64_t) + 1 + sizeof(std::uint32_t) + 1 +
                                (v >= 2 ? sizeof(std::uint64_t) : 0) + 2 * sizeof(std::uint32_t);
  if (!r.count(n, min_chunk)) return corrupt("chunk count");
  snap.chunks.resize(n);
  for (auto& c : snap.chunks) {
    std::uint8_t state = 0, gone = 0;
    std::uint32_t fragments = 0, ledger = 0;
    if (!r.chunk(c.id) || !r.field(state) || !r.string(c.holder) || !r.field(gone) ||
        (v >= 2 && !r.field(c.gone_epoch)) || !r.count(fragments, 2 * sizeof(std::uint32_t)))
      return corrupt("truncated chunk");
    if (state > static_cast<std::uint8_t>(data::chunk_state::returned) || gone > 1) return corrupt("chunk state");
    c.state = static_cast<data::chunk_state>(state);
    c.holder_gone = gone != 0;
    c.tied.resize(fragments);
    c.consumed.resize(fragments);
    for (std::uint32_t f = 0; f < fragments; ++f)
      if (!r.spans(c.tied[f]) || !r.spans(c.consumed[f])) return corrupt("truncated spans");
    if (!r.count(ledger, sizeof(std::uint32_t) + 3 * sizeof(std::uint64_t))) return corrupt("ledger count");
    c.ledger.resize(ledger);
    for (auto& l : c.ledger)
      if (!r.field(l.fragment) || !r.field(l.round) || !r.one_span(l.positions)) return corrupt("truncated ledger");
  }
  if (!r.count(n, 2 * sizeof(std::uint64_t))) return corrupt("returned count");
  snap.returned.resize(n);
  for (auto& id : snap.returned)
    if (!r.chunk(id)) return corrupt("truncated returned chunks");
  // a tie: worker, fragment, round, chunk, positions, missed
  const std::size_t min_tie = sizeof(std::uint32_t) + sizeof(std::uint32_t) + 5 * sizeof(std::uint64_t) + 1;
  if (!r.count(n, min_tie)) return corrupt("tie count");
  snap.ties.resize(n);
  for (auto& t : snap.ties) {
    std::uint8_t missed = 0;
    if (!r.string(t.worker) || !r.field(t.fragment) || !r.field(t.round) || !r.chunk(t.chunk) ||
        !r.one_span(t.positions) || !r.field(missed) || missed > 1)
      return corrupt("truncated tie");
    t.missed_once = missed != 0;
  }
  if (!r.count(n, sizeof(std::uint32_t) + sizeof(std::uint64_t) + 2 * sizeof(std::uint32_t)))
    return corrupt("commit count");
  snap.recent.resize(n);
  for (auto& c : snap.recent)
    if (!r.field(c.fragment) || !r.field(c.round) || !r.names(c.taken) || !r.names(c.late))
      return corrupt("truncated commit");
  if (v >= 2) {
    if (!r.count(n, sizeof(std::uint64_t))) return corrupt("commit epoch count");
    snap.commit_epochs.resize(n);
    for (auto& e : snap.commit_epochs)
      if (!r.field(e)) return corrupt("truncated commit epochs");
  }
  if (!r.at_end()) return corrupt("bytes past the last field");
  return snap;
}

namespace {

constexpr char parts_magic[4] = {'A', 'T', 'D', 'P'};
constexpr std::uint32_t parts_version = 1;

std::uint64_t bucket_of(data::chunk_id chunk) { return chunk.index / cursor_bucket_chunks; }

}  // namespace

std::string cursor_bucket_key(data::chunk_id chunk) {
  char key[40];
  std::snprintf(key, sizeof key, "%016llx/%016llx", static_cast<unsigned long long>(chunk.epoch),
                static_cast<unsigned long long>(bucket_of(chunk)));
  return key;
}

namespace {

// A bucket: a record of the run's config and its chunks [first, last) alone (what
// encode_cursor writes for them), made without copying them.
std::string encode_bucket(const data::cursor_config& config, const cursor_snapshot::chunk_entry* first,
                          const cursor_snapshot::chunk_entry* last) {
  auto out = record_start(config, 0, 0);
  put(out, static_cast<std::uint32_t>(last - first));
  for (auto* c = first; c != last; ++c) put_chunk_entry(out, *c);
  for (int empty = 0; empty < 4; ++empty) put(out, std::uint32_t{0});  // returned, ties, recent, commit epochs
  put(out, digest64(out.data(), out.size()));
  return out;
}

// The header: `rest` (a snapshot without its chunks), the number of chunks and of buckets.
std::string encode_header(const cursor_snapshot& rest, std::uint64_t chunks, std::size_t buckets) {
  const auto inner = encode_cursor(rest);
  std::string header(parts_magic, sizeof parts_magic);
  put(header, parts_version);
  put(header, chunks);
  put(header, static_cast<std::uint32_t>(buckets));
  put(header, static_cast<std::uint32_t>(inner.size()));
  header += inner;
  put(header, digest64(header.data(), header.size()));
  return header;
}

}  // namespace

cursor_parts encode_cursor_parts(const cursor_snapshot& snap) {
  cursor_parts parts;
  for (std::size_t first = 0; first < snap.chunks.size();) {
    const auto id = snap.chunks[first].id;
    const auto same_bucket = [&](data::chunk_id other) {
      return other.epoch == id.epoch && bucket_of(other) == bucket_of(id);
    };
    std::size_t end = first + 1;
    while (end < snap.chunks.size() && same_bucket(snap.chunks[end].id)) ++end;
    parts.buckets.emplace(cursor_bucket_key(id),
                          encode_bucket(snap.config, snap.chunks.data() + first, snap.chunks.data() + end));
    first = end;
  }
  cursor_snapshot rest;  // everything but the chunks
  rest.config = snap.config;
  rest.lease_epoch = snap.lease_epoch;
  rest.next_fresh = snap.next_fresh;
  rest.returned = snap.returned;
  rest.ties = snap.ties;
  rest.recent = snap.recent;
  rest.commit_epochs = snap.commit_epochs;
  parts.header = encode_header(rest, snap.chunks.size(), parts.buckets.size());
  return parts;
}

void update_cursor_parts(const data::data_cursor& cursor, const std::vector<data::chunk_id>& changed,
                         cursor_parts& parts) {
  if (parts.buckets.empty() && cursor.chunk_count() > 0) {  // none yet: every bucket
    parts = encode_cursor_parts(cursor.snapshot());
    return;
  }
  std::set<std::pair<std::uint64_t, std::uint64_t>> buckets;  // (epoch, bucket)
  for (const auto& id : changed) buckets.insert({id.epoch, bucket_of(id)});
  for (const auto& [epoch, bucket] : buckets) {
    const data::chunk_id first{epoch, bucket * cursor_bucket_chunks};
    const auto entries = cursor.chunks_between(first, {epoch, first.index + cursor_bucket_chunks - 1});
    if (entries.empty()) {
      parts.buckets.erase(cursor_bucket_key(first));
      continue;
    }
    parts.buckets[cursor_bucket_key(first)] =
        encode_bucket(cursor.config(), entries.data(), entries.data() + entries.size());
  }
  parts.header = encode_header(cursor.snapshot_without_chunks(), cursor.chunk_count(), parts.buckets.size());
}

expected<cursor_snapshot> decode_cursor_parts(const std::string& header,
                                              const std::map<std::string, std::string>& buckets) {
  const auto corrupt = [](const std::string& why) {
    return make_error(errc::storage_failure, "corrupt data cursor record: " + why);
  };
  if (header.size() >= sizeof magic && std::memcmp(header.data(), magic, sizeof magic) == 0) {
    if (!buckets.empty()) return corrupt("a whole record with parts beside it");
    return decode_cursor(header);
  }
  std::uint64_t stored = 0, chunks = 0;
  std::uint32_t v = 0, bucket_count = 0, inner_size = 0;
  if (header.size() < sizeof parts_magic + sizeof stored ||
      std::memcmp(header.data(), parts_magic, sizeof parts_magic) != 0)
    return corrupt("bad magic");
  const std::size_t end = header.size() - sizeof stored;
  std::memcpy(&stored, header.data() + end, sizeof stored);
  if (digest64(header.data(), end) != stored)
    return make_error(errc::checksum_mismatch, "data cursor record: the checksum of its header does not match");
  reader r(header, sizeof parts_magic, end);
  if (!r.field(v) || v != parts_version) return corrupt("unknown version of its header");
  if (!r.field(chunks) || !r.field(bucket_count) || !r.field(inner_size) || sizeof parts_magic + 20 + inner_size != end)
    return corrupt("truncated header");
  auto snap = decode_cursor(header.substr(sizeof parts_magic + 20, inner_size));
  if (!snap) return snap.err();
  if (!snap->chunks.empty()) return corrupt("chunks in its header");
  if (buckets.size() != bucket_count)
    return corrupt(std::to_string(buckets.size()) + " buckets of chunks where its header says " +
                   std::to_string(bucket_count));
  for (const auto& [key, bytes] : buckets) {  // in key order: chunk order
    auto bucket = decode_cursor(bytes);
    if (!bucket) return bucket.err();
    for (auto& c : bucket->chunks) {
      if (cursor_bucket_key(c.id) != key) return corrupt("a chunk under another bucket's key " + key);
      snap->chunks.push_back(std::move(c));
    }
  }
  if (snap->chunks.size() != chunks)
    return corrupt(std::to_string(snap->chunks.size()) + " chunks where its header says " + std::to_string(chunks));
  return snap;
}

}  // namespace atl
