// The data cursor's stored form (actors/shared/cursor_record.hpp): what is written reads
// back to a cursor that goes on as the original would; damaged bytes are refused, typed.
#include <cstring>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "actors/shared/cursor_record.hpp"
#include "actors/shared/data_ledger.hpp"
#include "runtime/core/digest.hpp"

namespace atl {
namespace {

using data::chunk_id;
using data::data_cursor;

// A cursor with something in every part: chunks leased, consumed, partial and returned,
// ties pending (one missed once), commits remembered.
data_cursor busy_cursor() {
  auto c = data_cursor::make({20, 4, 2, 3});
  EXPECT_TRUE(c);
  const auto a = c->lease("worker/1.0"), b = c->lease("worker/2.0"), d = c->lease("worker/3.0");
  EXPECT_TRUE(a && b && d);
  EXPECT_FALSE(c->tie("worker/1.0", 0, 1, *a, {0, 4}));
  EXPECT_FALSE(c->tie("worker/1.0", 1, 1, *a, {0, 4}));
  EXPECT_FALSE(c->tie("worker/2.0", 0, 1, *b, {4, 6}));
  EXPECT_FALSE(c->tie("worker/2.0", 1, 2, *b, {4, 8}));
  c->committed(0, 1, 3, {"worker/1.0"}, {});  // worker/2.0's tie missed once
  c->committed(1, 1, 3, {"worker/1.0"}, {});
  c->worker_gone("worker/3.0", 2);  // d goes back: both fragments committed a round of epoch 3
  return std::move(*c);
}

TEST(CursorRecord, WhatIsWrittenReadsBackAndGoesOnAsTheOriginal) {
  auto original = busy_cursor();
  const auto bytes = encode_cursor(original.snapshot());
  auto decoded = decode_cursor(bytes);
  ASSERT_TRUE(decoded) << decoded.err().describe();
  EXPECT_EQ(encode_cursor(*decoded), bytes);
  EXPECT_EQ(decoded->commit_epochs, (std::vector<std::uint64_t>{3, 3}));
  auto restored = data_cursor::restore(*decoded);
  ASSERT_TRUE(restored) << restored.err().describe();
  // The same next steps give the same states and ledgers.
  for (auto* c : {&original, &*restored}) {
    c->committed(0, 2, 0, {}, {"worker/2.0"});  // the missed tie taken late
    c->committed(1, 2, 0, {"worker/2.0"}, {});
    c->worker_gone("worker/2.0", 0);
  }
  EXPECT_EQ(encode_cursor(restored->snapshot()), encode_cursor(original.snapshot()));
  EXPECT_EQ(restored->state_of({0, 0}), data::chunk_state::consumed);
  EXPECT_EQ(restored->state_of({0, 1}), data::chunk_state::partial);
  EXPECT_EQ(restored->state_of({0, 2}), data::chunk_state::returned);
  const auto next = restored->lease("worker/4.0");
  ASSERT_TRUE(next);
  EXPECT_TRUE(*next == (chunk_id{0, 2})) << "the returned chunk first, after a restart too";
}

// A record of version 1 (before the gone and commit epochs) still reads: every epoch 0, so
// chunks of gone holders settle as they did then. A version after ours is refused.
TEST(CursorRecord, ARecordOfVersionOneReadsWithItsEpochsAtZeroAndALaterVersionIsRefused) {
  auto c = data_cursor::make({20, 4, 2, 3});
  ASSERT_TRUE(c);
  auto bytes = encode_cursor(c->snapshot());  // no chunks: v1 lacks only the commit epochs
  bytes.resize(bytes.size() - sizeof(std::uint64_t));  // the digest
  auto v1 = bytes.substr(0, bytes.size() - sizeof(std::uint32_t) - 2 * sizeof(std::uint64_t));  // two fragments
  const auto seal = [](std::string record, std::uint32_t version) {
    std::memcpy(&record[4], &version, sizeof version);
    const auto digest = digest64(record.data(), record.size());
    record.append(reinterpret_cast<const char*>(&digest), sizeof digest);
    return record;
  };
  auto decoded = decode_cursor(seal(v1, 1));
  ASSERT_TRUE(decoded) << decoded.err().describe();
  EXPECT_TRUE(decoded->commit_epochs.empty());
  auto restored = data_cursor::restore(*decoded);
  ASSERT_TRUE(restored) << restored.err().describe();
  EXPECT_EQ(restored->snapshot().commit_epochs, (std::vector<std::uint64_t>{0, 0}));
  EXPECT_EQ(decode_cursor(seal(bytes, 3)).err().code, errc::storage_failure) << "a version from after this build";
}

TEST(CursorRecord, EveryFlippedByteAndEveryTruncationIsRefused) {
  const auto bytes = encode_cursor(busy_cursor().snapshot());
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    auto bad = bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    const auto got = decode_cursor(bad);
    ASSERT_FALSE(got) << "byte " << i;
    EXPECT_TRUE(got.err().code == errc::checksum_mismatch || got.err().code == errc::storage_failure) << i;
  }
  for (std::size_t n = 0; n < bytes.size(); ++n) ASSERT_FALSE(decode_cursor(bytes.substr(0, n))) << n << " bytes";
}

// A record whose checksum holds but whose counts claim more than its bytes (a bug, or a
// forged record) is refused before anything that size is allocated.
TEST(CursorRecord, ACountLargerThanTheRecordIsRefusedWithoutAllocatingIt) {
  const auto bytes = encode_cursor(busy_cursor().snapshot());
  const std::size_t chunk_count_at = 4 + 4 + 5 * 8 + 4;  // magic, version, config (one u32) and lease position
  auto forged = bytes.substr(0, bytes.size() - 8);
  const std::uint32_t huge = 0xffffffffu;
  forged.replace(chunk_count_at, sizeof huge, reinterpret_cast<const char*>(&huge), sizeof huge);
  const std::uint64_t sum = digest64(forged.data(), forged.size());
  forged.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  const auto got = decode_cursor(forged);
  ASSERT_FALSE(got);
  EXPECT_EQ(got.err().code, errc::storage_failure);
  EXPECT_NE(got.err().message.find("chunk count"), std::string::npos) << got.err().message;
}

// The ledger an export writes: each commit's units, as the order maps its positions, and
// only up to the exported round of each fragment.
// A cursor whose chunks span several buckets of two epochs: 3 chunks of 4 units an epoch
// would fit one bucket, so the chunks here are of one unit, 200 an epoch.
data_cursor cursor_of_buckets() {
  auto c = data_cursor::make({200, 1, 1, 2});
  EXPECT_TRUE(c);
  for (int i = 0; i < 260; ++i) {  // the whole first epoch and 60 chunks of the second
    const auto chunk = c->lease("worker/1.0");
    EXPECT_TRUE(chunk);
    EXPECT_FALSE(c->tie("worker/1.0", 0, 1, *chunk, c->positions_of(*chunk)));
  }
  c->committed(0, 1, 0, {"worker/1.0"}, {});
  return std::move(*c);
}

// In parts: the same snapshot back, from a header and buckets of chunks of one epoch each;
// and a header that is a whole record (a store written before parts) still reads.
TEST(CursorRecord, InPartsItReadsBackAndAWholeRecordStillReads) {
  for (auto original : {busy_cursor(), cursor_of_buckets()}) {
    const auto snap = original.snapshot();
    const auto parts = encode_cursor_parts(snap);
    std::size_t chunks_in_buckets = 0;
    for (const auto& [key, bytes] : parts.buckets) {
      auto bucket = decode_cursor(bytes);
      ASSERT_TRUE(bucket);
      EXPECT_LE(bucket->chunks.size(), cursor_bucket_chunks) << key;
      chunks_in_buckets += bucket->chunks.size();
    }
    EXPECT_EQ(chunks_in_buckets, snap.chunks.size());
    auto decoded = decode_cursor_parts(parts.header, parts.buckets);
    ASSERT_TRUE(decoded) << decoded.err().describe();
    EXPECT_EQ(encode_cursor(*decoded), encode_cursor(snap));
    auto whole = decode_cursor_parts(encode_cursor(snap), {});
    ASSERT_TRUE(whole) << whole.err().describe();
    EXPECT_EQ(encode_cursor(*whole), encode_cursor(snap));
  }
  const auto buckets_of = [](std::uint64_t chunks) {
    return (chunks + cursor_bucket_chunks - 1) / cursor_bucket_chunks;
  };
  EXPECT_EQ(encode_cursor_parts(cursor_of_buckets().snapshot()).buckets.size(), buckets_of(200) + buckets_of(60))
      << "buckets of consecutive chunks, one epoch each";
}

// One more report changes the header and the bucket of the chunks it touched, not the rest.
TEST(CursorRecord, AReportChangesOnlyTheBucketsOfTheChunksItTouched) {
  auto c = cursor_of_buckets();
  const auto before = encode_cursor_parts(c.snapshot());
  const auto chunk = c.lease("worker/2.0");
  ASSERT_TRUE(chunk);
  EXPECT_FALSE(c.tie("worker/2.0", 0, 2, *chunk, c.positions_of(*chunk)));
  c.committed(0, 2, 0, {"worker/2.0"}, {});
  const auto after = encode_cursor_parts(c.snapshot());
  ASSERT_EQ(after.buckets.size(), before.buckets.size());
  std::size_t changed = 0;
  for (const auto& [key, bytes] : after.buckets) changed += before.buckets.at(key) != bytes;
  EXPECT_EQ(changed, 1u);
  EXPECT_NE(after.header, before.header);
}

// A bucket lost, added, damaged or filed under another key, and a damaged header, are refused.
TEST(CursorRecord, PartsMissingExtraDamagedOrMisfiledAreRefused) {
  const auto parts = encode_cursor_parts(cursor_of_buckets().snapshot());
  ASSERT_GE(parts.buckets.size(), 2u);
  const auto first = parts.buckets.begin(), second = std::next(first);
  auto missing = parts.buckets;
  missing.erase(first->first);
  EXPECT_EQ(decode_cursor_parts(parts.header, missing).err().code, errc::storage_failure);
  auto extra = parts.buckets;
  extra.emplace("ffffffffffffffff/0000000000000000", first->second);
  EXPECT_EQ(decode_cursor_parts(parts.header, extra).err().code, errc::storage_failure);
  auto swapped = parts.buckets;
  swapped[first->first] = second->second;
  swapped[second->first] = first->second;
  EXPECT_EQ(decode_cursor_parts(parts.header, swapped).err().code, errc::storage_failure);
  auto damaged = parts.buckets;
  damaged[first->first][20] ^= 0x10;
  EXPECT_EQ(decode_cursor_parts(parts.header, damaged).err().code, errc::checksum_mismatch);
  for (std::size_t i = 0; i < parts.header.size(); ++i) {
    auto bad = parts.header;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    ASSERT_FALSE(decode_cursor_parts(bad, parts.buckets)) << "header byte " << i;
  }
  EXPECT_EQ(decode_cursor_parts(encode_cursor(cursor_of_buckets().snapshot()), parts.buckets).err().code,
            errc::storage_failure)
      << "a whole record with parts beside it";
}

// Parts kept up to date from the changed chunks alone are the parts made from the whole
// cursor, after every step of random leases, ties (single, all-or-none, refused), commits,
// workers gone and the run's end: no change to a chunk goes unnoticed. From no parts (a
// whole record read), the first update makes every bucket.
TEST(CursorRecord, PartsUpdatedFromTheChangedChunksAreThePartsOfTheWholeCursor) {
  for (const std::uint32_t seed : {1u, 2u, 3u}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937 rng(seed);
    auto made = data_cursor::make({700, 1, 2, 3});  // 700 chunks an epoch: three buckets each
    ASSERT_TRUE(made);
    auto& c = *made;
    cursor_parts parts;
    const std::vector<std::string> workers = {"worker/1.0", "worker/2.0", "worker/3.0", "worker/4.0"};
    std::map<std::string, std::vector<chunk_id>> held;
    std::uint64_t round[2] = {1, 1};
    for (int step = 0; step < 3000; ++step) {
      const auto& w = workers[rng() % workers.size()];
      const auto fragment = static_cast<std::uint32_t>(rng() % 2);
      const auto op = rng() % 16;
      switch (op < 7 ? 0 : op < 11 ? 1 : op < 15 ? 2 : 3) {
        case 0: {
          if (auto chunk = c.lease(w)) held[w].push_back(*chunk);
          break;
        }
        case 1: {  // one piece, or two (the second may be refused: all or none)
          if (held[w].empty()) break;
          const auto chunk = held[w][rng() % held[w].size()];
          const auto whole = c.positions_of(chunk);
          std::vector<data::piece> pieces = {{chunk, whole}};
          if (rng() % 3 == 0) pieces.push_back({held[w].back(), c.positions_of(held[w].back())});
          (void)c.tie_all(w, fragment, round[fragment], pieces);
          break;
        }
        case 2: {
          std::vector<std::string> taken, late;
          for (const auto& x : workers) (rng() % 4 ? taken : late).push_back(x);
          c.committed(fragment, round[fragment]++, 0, taken, late);
          break;
        }
        default:
          c.worker_gone(w, 0);
          held[w].clear();
          break;
      }
      if (step == 2900) c.run_finished();
      if (step == 1500) parts = cursor_parts{encode_cursor(c.snapshot()), {}};  // read from a whole record
      update_cursor_parts(c, c.take_changed(), parts);
      const auto whole = encode_cursor_parts(c.snapshot());
      ASSERT_EQ(parts.header, whole.header) << "step " << step;
      ASSERT_EQ(parts.buckets, whole.buckets) << "step " << step;
    }
    EXPECT_GE(parts.buckets.size(), 2u) << "a cursor of more than one bucket";
  }
}

TEST(DataLedger, ListsTheUnitsEachCommitLearnedUpToTheExportedRounds) {
  auto cursor = data_cursor::make({20, 5, 2, 0});
  ASSERT_TRUE(cursor);
  const auto chunk = cursor->lease("w");
  ASSERT_TRUE(chunk);
  ASSERT_FALSE(cursor->tie("w", 0, 1, *chunk, {0, 5}));
  ASSERT_FALSE(cursor->tie("w", 1, 1, *chunk, {0, 3}));
  ASSERT_FALSE(cursor->tie("w", 1, 2, *chunk, {3, 5}));
  cursor->committed(0, 1, 0, {"w"}, {});
  cursor->committed(1, 1, 0, {"w"}, {});
  cursor->committed(1, 2, 0, {"w"}, {});
  const std::uint64_t seed = 7;
  const auto units = [&](std::uint64_t begin, std::uint64_t end) {
    std::vector<std::uint64_t> ids;
    for (auto p = begin; p < end; ++p) ids.push_back(data::unit_at(seed, 0, p, 20));
    return nlohmann::json(ids);
  };
  const auto commit = [](std::uint32_t fragment, std::uint64_t round, nlohmann::json ids) {
    return nlohmann::json{{"fragment", fragment}, {"round", round}, {"units", std::move(ids)}};
  };
  struct row {
    const char* exported;
    std::vector<std::uint64_t> rounds;
    nlohmann::json consumed;
  };
  const row rows[] = {
      {"fragment 1 at round 1: its round 2 is not in the file",
       {1, 1},
       {commit(0, 1, units(0, 5)), commit(1, 1, units(0, 3))}},
      {"both at their latest",
       {1, 2},
       {commit(0, 1, units(0, 5)), commit(1, 1, units(0, 3)), commit(1, 2, units(3, 5))}},
      {"fragment 0 before its first commit", {0, 2}, {commit(1, 1, units(0, 3)), commit(1, 2, units(3, 5))}},
      {"fragment 1 not exported", {1}, {commit(0, 1, units(0, 5))}},
  };
  for (const auto& r : rows) {
    const auto ledger = data_ledger(cursor->snapshot(), seed, r.rounds);
    EXPECT_EQ(ledger["units"], 20) << r.exported;
    EXPECT_EQ(ledger["seed"], seed) << r.exported;
    ASSERT_EQ(ledger["epochs"].size(), 1u) << r.exported << ledger.dump();
    EXPECT_EQ(ledger["epochs"][0]["epoch"], 0) << r.exported;
    EXPECT_EQ(ledger["epochs"][0]["consumed"], r.consumed) << r.exported << "\n" << ledger.dump();
  }
  EXPECT_TRUE(data_ledger(cursor->snapshot(), seed, {})["epochs"].empty()) << "nothing exported, nothing learned";
  // The same two sync units as the two slices of one fragment (diloco.shards = 2).
  const auto sliced = data_ledger(cursor->snapshot(), seed, {1, 2}, 2);
  EXPECT_EQ(sliced["fragments"], 1);
  EXPECT_EQ(sliced["shards"], 2);
  auto in_slices =
      nlohmann::json::array({commit(0, 1, units(0, 5)), commit(0, 1, units(0, 3)), commit(0, 2, units(3, 5))});
  for (int i = 0; i < 3; ++i) in_slices[i]["slice"] = i == 0 ? 0 : 1;
  EXPECT_EQ(sliced["epochs"][0]["consumed"], in_slices) << sliced.dump();
  EXPECT_EQ(data_ledger(cursor->snapshot(), seed, {1, 2})["shards"], 1);
}

}  // namespace
}  // namespace atl
