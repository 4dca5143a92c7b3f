#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "runtime/core/digest.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/registry_store.hpp"
#include "tests/support/full_disk.hpp"
#include "tests/support/refusing_store.hpp"
#include "tests/support/test_dir.hpp"

namespace atl {
namespace {

fragment_checkpoint make_round(std::uint32_t fragment, std::uint64_t round, std::size_t n) {
  fragment_checkpoint cp;
  cp.fragment = fragment;
  cp.round = round;
  cp.epoch = 2;
  for (std::size_t i = 0; i < n; ++i) {
    // Values whose bits matter: subnormals, negative zero, odd mantissas.
    cp.theta.push_back(static_cast<float>(i) * 0.1f + static_cast<float>(round) * 1e-7f);
    cp.momentum.push_back(i % 3 == 0 ? -0.0f : 1e-40f * static_cast<float>(i));
  }
  return cp;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// A full disk refuses the commit with storage_full, keeps the latest round readable, and
// the same open store commits again once space is freed (root: mounts a 16 MiB tmpfs).
TEST(CheckpointStore, AFullDiskRefusesACommitAndTheStoreRecoversWhenSpaceReturns) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  testing::temp_dir dir;
  const std::string mnt = dir.sub("tmpfs");
  std::filesystem::create_directories(mnt);
  testing::tmpfs_mount tmpfs(mnt, "16m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs";
  {
    auto db = open_rocksdb_store(mnt + "/db");
    ASSERT_TRUE(db) << db.err().describe();
    checkpoint_store store(**db, 5);
    ASSERT_FALSE(store.commit({0, 1, 1, {1, 2, 3}, {0, 0, 0}}));
    testing::fill(mnt + "/filler");
    auto full = store.commit({0, 2, 1, {4, 5, 6}, {0, 0, 0}});
    EXPECT_EQ(full.code, errc::storage_full) << full.describe();
    EXPECT_NE(full.message.find("disk is full"), std::string::npos);
    EXPECT_TRUE(store.health().failing);
    auto latest = store.latest(0);
    ASSERT_TRUE(latest && latest->has_value());
    EXPECT_EQ((*latest)->round, 1u);  // the previous state, intact

    std::remove((mnt + "/filler").c_str());
    EXPECT_FALSE(store.commit({0, 2, 1, {4, 5, 6}, {0, 0, 0}}));
    EXPECT_FALSE(store.health().failing);
    EXPECT_EQ(store.health().failed_commits, 1u);
    EXPECT_EQ((*store.latest(0))->round, 2u);
  }
}

TEST(CheckpointStore, ARoundCommittedToRocksDbRestoresBitExactAfterReopen) {
  testing::temp_dir dir;
  const auto original = make_round(0, 3, 1000);
  {
    auto db = open_rocksdb_store(dir.sub("db"));
    ASSERT_TRUE(db) << db.err().describe();
    checkpoint_store store(**db, 5);
    ASSERT_FALSE(store.commit(make_round(0, 1, 1000)));
    ASSERT_FALSE(store.commit(original));
  }
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 5);
  auto latest = store.latest(0);
  ASSERT_TRUE(latest);
  ASSERT_TRUE(latest->has_value());
  EXPECT_EQ((*latest)->round, 3u);
  EXPECT_EQ((*latest)->epoch, 2u);
  EXPECT_TRUE(same_bits((*latest)->theta, original.theta));
  EXPECT_TRUE(same_bits((*latest)->momentum, original.momentum));
}

TEST(CheckpointStore, AReadOnlyStoreSeesTheWritersRoundsBesideItAndRefusesToWrite) {
  testing::temp_dir dir;
  auto writer = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(writer) << writer.err().describe();
  checkpoint_store written(**writer, 5);
  const auto round = make_round(1, 7, 500);
  ASSERT_FALSE(written.commit(round));  // synced to the WAL, not flushed: the reader replays it
  auto reader = open_rocksdb_store_read_only(dir.sub("db"));  // the writer still holds the lock
  ASSERT_TRUE(reader) << reader.err().describe();
  checkpoint_store read(**reader, 5);
  auto latest = read.latest(1);
  ASSERT_TRUE(latest && latest->has_value());
  EXPECT_EQ((*latest)->round, 7u);
  EXPECT_TRUE(same_bits((*latest)->theta, round.theta));
  auto refused = read.commit(make_round(1, 8, 500));
  EXPECT_EQ(refused.code, errc::storage_failure);
  EXPECT_FALSE(open_rocksdb_store_read_only(dir.sub("no-such-db"))) << "read-only never creates a store";
}

TEST(CheckpointStore, TheLatestRoundComesFromTheManifestAlone) {
  auto mem = make_memory_store();
  checkpoint_store store(*mem, 5);
  auto none = store.latest_round(0);
  ASSERT_TRUE(none);
  EXPECT_FALSE(none->has_value());
  ASSERT_FALSE(store.commit(make_round(0, 1, 10)));
  ASSERT_FALSE(store.commit(make_round(0, 2, 10)));
  auto round = store.latest_round(0);
  ASSERT_TRUE(round && round->has_value());
  EXPECT_EQ(**round, 2u);
  EXPECT_FALSE(store.latest_round(1)->has_value()) << "another fragment has none";
}

TEST(CheckpointStore, StoredRoundsAreTheListWithoutReadingValues) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 2);
  for (std::uint64_t r = 1; r <= 3; ++r) ASSERT_FALSE(store.commit(make_round(0, r, 20)));
  ASSERT_FALSE(store.commit(make_round(1, 1, 20)));
  auto rounds = store.stored_rounds();
  auto full = store.list();
  ASSERT_TRUE(rounds && full);
  ASSERT_EQ(rounds->size(), full->size());
  for (std::size_t i = 0; i < rounds->size(); ++i) {
    EXPECT_EQ((*rounds)[i].fragment, (*full)[i].fragment);
    EXPECT_EQ((*rounds)[i].round, (*full)[i].round);
  }
  EXPECT_EQ(rounds->size(), 3u) << "fragment 0 keeps rounds 2 and 3, fragment 1 round 1";
}

TEST(CheckpointStore, OnlyTheLastKRoundsAreKept) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  for (std::uint64_t r = 0; r <= 6; ++r) ASSERT_FALSE(store.commit(make_round(0, r, 4)));
  auto list = store.list();
  ASSERT_TRUE(list);
  std::vector<std::uint64_t> rounds;
  for (const auto& s : *list) rounds.push_back(s.round);
  EXPECT_EQ(rounds, (std::vector<std::uint64_t>{4, 5, 6}));
}

TEST(CheckpointStore, ARoundThatIsNotNewerIsRefusedAndLeavesStateIntact) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  ASSERT_FALSE(store.commit(make_round(0, 4, 4)));
  auto older = make_round(0, 2, 4);
  EXPECT_EQ(store.commit(older).code, errc::wrong_round);
  auto different = make_round(0, 4, 4);
  different.theta[1] = 9.0f;
  EXPECT_EQ(store.commit(different).code, errc::wrong_round);  // round 4 again, other bytes
  auto latest = store.latest(0);
  ASSERT_TRUE(latest && latest->has_value());
  EXPECT_EQ((*latest)->round, 4u);
  EXPECT_EQ((*latest)->theta, make_round(0, 4, 4).theta);
}

// A coordinator whose acknowledgement was lost (the head died after the write) sends the
// round again: the same bytes are acknowledged as committed, without a second write.
TEST(CheckpointStore, TheSameRoundWithTheSameBytesIsAcknowledgedAgain) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  ASSERT_FALSE(store.commit(make_round(0, 4, 4)));
  EXPECT_FALSE(store.commit(make_round(0, 4, 4)));
  ASSERT_FALSE(store.commit(make_round(0, 5, 4)));
  EXPECT_EQ((*store.latest(0))->round, 5u);
  EXPECT_EQ(store.commit(make_round(0, 4, 4)).code, errc::wrong_round);  // older than the latest
}

// A keeper may hold a round whose coordinator died before every keeper had it (so it was
// never released); the successor, in a newer epoch, redoes the round and replaces it. The
// same epoch, or an older round, is still refused.
TEST(CheckpointStore, TheLatestRoundIsReplacedOnlyFromANewerEpoch) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  ASSERT_FALSE(store.commit(make_round(0, 3, 4)));
  ASSERT_FALSE(store.commit(make_round(0, 4, 4)));  // epoch 2
  auto redone = make_round(0, 4, 4);
  redone.theta[0] = 42.0f;
  EXPECT_EQ(store.commit(redone).code, errc::wrong_round);  // same epoch: a conflict
  redone.epoch = 3;
  EXPECT_FALSE(store.commit(redone));
  EXPECT_EQ((*store.latest(0))->theta[0], 42.0f);
  auto older = make_round(0, 3, 4);
  older.epoch = 9;
  EXPECT_EQ(store.commit(older).code, errc::wrong_round);
  EXPECT_EQ((*store.latest(0))->round, 4u);
}

TEST(CheckpointStore, FragmentsAreIndependent) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  ASSERT_FALSE(store.commit(make_round(0, 2, 4)));
  ASSERT_FALSE(store.commit(make_round(1, 7, 8)));
  EXPECT_EQ((*store.latest(0))->round, 2u);
  EXPECT_EQ((*store.latest(1))->round, 7u);
  EXPECT_FALSE(store.latest(2)->has_value());
}

TEST(CheckpointStore, ACorruptRecordIsReportedNotReturned) {
  auto kv = make_memory_store();
  checkpoint_store store(*kv, 3);
  ASSERT_FALSE(store.commit(make_round(0, 1, 16)));
  auto rows = kv->scan(column::fragments, "f/");
  ASSERT_TRUE(rows);
  ASSERT_EQ(rows->size(), 1u);
  std::string damaged = (*rows)[0].second;
  damaged[40] ^= 0x10;
  ASSERT_FALSE(kv->commit({{column::fragments, (*rows)[0].first, damaged}}));
  auto latest = store.latest(0);
  ASSERT_FALSE(latest);
  EXPECT_EQ(latest.err().code, errc::storage_failure);
  EXPECT_EQ(checkpoint_store::decode("xx").err().code, errc::storage_failure);
}

std::set<std::string> value_files_in(const std::string& db) {
  std::set<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(db + "/fragment-values"))
    out.insert(e.path().filename().string());
  return out;
}

// On RocksDB a round's values are written once to a file of their own and the record only
// names it (storage/value_files.hpp): the kept rounds' files stay, and one spare (the last
// pruned or replaced round's file, which the next record overwrites); a round replaced
// from a newer epoch leaves no more files behind, and what comes back is bit-exact.
TEST(CheckpointStore, OnRocksDbEachKeptRoundIsOneFileAndPrunedOrReplacedFilesGo) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 2);
  for (std::uint64_t r = 1; r <= 5; ++r) ASSERT_FALSE(store.commit(make_round(0, r, 3000)));
  const std::string r3 = "f00000000-r0000000000000003-e0000000000000002.atck";
  const std::string r4 = "f00000000-r0000000000000004-e0000000000000002.atck";
  const std::string r5 = "f00000000-r0000000000000005-e0000000000000002.atck";
  EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{r3, r4, r5})) << "rounds 4 and 5, round 3 spare";
  auto record = (*db)->get(column::fragments, "f/00000000/r/0000000000000005");
  ASSERT_TRUE(record && record->has_value());
  EXPECT_LT((*record)->size(), 100u) << "the record names the file; the values are not in RocksDB";
  auto redone = make_round(0, 5, 3000);
  redone.epoch = 3;
  redone.theta[7] = 7.5f;
  ASSERT_FALSE(store.commit(redone));
  EXPECT_EQ(value_files_in(dir.sub("db")),
            (std::set<std::string>{r4, r5, "f00000000-r0000000000000005-e0000000000000003.atck"}))
      << "the redone round overwrote the spare, and the replaced round's file is the spare now";
  auto latest = store.latest(0);
  ASSERT_TRUE(latest && latest->has_value());
  EXPECT_TRUE(same_bits((*latest)->theta, redone.theta));
  EXPECT_TRUE(same_bits((*latest)->momentum, redone.momentum));
  auto listed = store.list();
  ASSERT_TRUE(listed) << listed.err().describe();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].epoch, 3u);
  EXPECT_EQ((*listed)[1].digest, digest64(redone.theta.data(), redone.theta.size() * sizeof(float)));
  EXPECT_EQ((*listed)[1].params, 3000u);
}

// A keeper acknowledges a round between its two steps (commit_keeping_files, then
// remove_unnamed_files): the round is durable and latest before the pruned round's file
// is let go. One such file per fragment is kept as the spare that the fragment's next
// record overwrites in place (same size: no block allocated); a spare of another size is
// removed, and a crash in between leaves files that the next process sweeps.
TEST(CheckpointStore, APrunedRoundsFileIsLetGoAfterTheCommitAndOverwrittenByTheNext) {
  const auto file = [](std::uint64_t round) {
    return "f00000000-r000000000000000" + std::to_string(round) + "-e0000000000000002.atck";
  };
  testing::temp_dir dir;
  {
    auto db = open_rocksdb_store(dir.sub("db"));
    ASSERT_TRUE(db) << db.err().describe();
    checkpoint_store store(**db, 1);
    ASSERT_FALSE(store.commit(make_round(0, 1, 200)));
    const auto round2 = make_round(0, 2, 200);
    ASSERT_FALSE(store.commit_keeping_files(checkpoint_view::of(round2)));
    EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{file(1), file(2)}));
    auto latest = store.latest(0);
    ASSERT_TRUE(latest && latest->has_value());
    EXPECT_EQ((*latest)->round, 2u);
    EXPECT_FALSE(store.load(0, 1)->has_value()) << "round 1 is pruned already";
    store.remove_unnamed_files();
    const auto inode = [&](std::uint64_t round) {
      struct stat st {};
      EXPECT_EQ(::stat((dir.sub("db") + "/fragment-values/" + file(round)).c_str(), &st), 0);
      return st.st_ino;
    };
    const auto spare_inode = inode(1);
    ASSERT_FALSE(store.commit(make_round(0, 3, 200)));
    EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{file(2), file(3)}))
        << "round 3 was written over round 1's file; round 2's is the spare now";
    EXPECT_EQ(inode(3), spare_inode) << "the same file, overwritten in place";
    EXPECT_TRUE(same_bits((*store.latest(0))->theta, make_round(0, 3, 200).theta));
    ASSERT_FALSE(store.commit(make_round(0, 4, 300)));  // another size: the spare is removed
    EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{file(3), file(4)}));
    EXPECT_TRUE(same_bits((*store.latest(0))->theta, make_round(0, 4, 300).theta));
    const auto round5 = make_round(0, 5, 300);
    ASSERT_FALSE(store.commit_keeping_files(checkpoint_view::of(round5)));  // and then the process dies
  }
  EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{file(4), file(5)}))
      << "round 4's file is unnamed and was never let go";
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 1);
  ASSERT_FALSE(store.commit(make_round(0, 6, 300)));
  EXPECT_EQ(value_files_in(dir.sub("db")), (std::set<std::string>{file(5), file(6)}))
      << "the unnamed files of the dead process are swept; round 5's is the spare";
  EXPECT_EQ((*store.latest(0))->round, 6u);
}

// `atollctl checkpoints` lists every kept round of every fragment from the records alone:
// reading hundreds of MiB of values per round would stall the registry that answers it.
TEST(CheckpointStore, ListingRoundsReadsNoValueFile) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 3);
  std::vector<std::uint64_t> digests;
  for (std::uint64_t r = 1; r <= 2; ++r) {
    auto cp = make_round(1, r, 500);
    digests.push_back(digest64(cp.theta.data(), cp.theta.size() * sizeof(float)));
    ASSERT_FALSE(store.commit(cp));
  }
  for (const auto& name : value_files_in(dir.sub("db")))
    std::filesystem::remove(dir.sub("db") + "/fragment-values/" + name);
  auto listed = store.list();
  ASSERT_TRUE(listed) << listed.err().describe();
  ASSERT_EQ(listed->size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ((*listed)[i].fragment, 1u);
    EXPECT_EQ((*listed)[i].round, i + 1);
    EXPECT_EQ((*listed)[i].digest, digests[i]);
    EXPECT_EQ((*listed)[i].params, 500u);
  }
  EXPECT_FALSE(store.latest(1)) << "the values themselves are gone";
}

// A keeper commits with the checksum decode() already checked (checkpoint_view::theta_digest):
// the reference stores that digest as given, without hashing theta again, while the
// record file keeps its own digest over everything it holds and restores bit-exact.
TEST(CheckpointStore, ADigestTheCallerHasIsStoredWithoutHashingThetaAgain) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 3);
  const auto cp = make_round(1, 1, 500);
  auto view = checkpoint_view::of(cp);
  const std::uint64_t given = 0x5eed;  // not theta's digest: shows where the stored one came from
  view.theta_digest = given;
  ASSERT_FALSE(store.commit(view));
  auto listed = store.list();
  ASSERT_TRUE(listed) << listed.err().describe();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].digest, given);
  auto back = store.latest(1);
  ASSERT_TRUE(back && *back) << "the record file checks out against its own digest";
  EXPECT_TRUE(same_bits((*back)->theta, cp.theta));
  EXPECT_TRUE(same_bits((*back)->momentum, cp.momentum));
}

// A file lost from under its record is reported, not returned as empty state; files no
// record names (a crash between a file and its batch) are swept after the next commit.
TEST(CheckpointStore, AMissingValueFileIsAFailureAndStrayFilesAreSwept) {
  testing::temp_dir dir;
  {
    auto db = open_rocksdb_store(dir.sub("db"));
    ASSERT_TRUE(db) << db.err().describe();
    checkpoint_store store(**db, 3);
    ASSERT_FALSE(store.commit(make_round(0, 1, 100)));
    for (const auto& name : value_files_in(dir.sub("db")))
      std::filesystem::remove(dir.sub("db") + "/fragment-values/" + name);
    auto lost = store.latest(0);
    ASSERT_FALSE(lost);
    EXPECT_EQ(lost.err().code, errc::storage_failure);
  }
  for (const char* stray : {"f00000000-r0000000000000009-e0000000000000001.atck", "half.atck.tmp"})
    std::ofstream(dir.sub("db") + "/fragment-values/" + stray) << "x";
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 3);
  ASSERT_FALSE(store.commit(make_round(0, 2, 100)));
  EXPECT_EQ(value_files_in(dir.sub("db")), std::set<std::string>{"f00000000-r0000000000000002-e0000000000000002.atck"});
  EXPECT_EQ((*store.latest(0))->round, 2u);
}

// Run dirs written before value files keep their records inline; they still load.
TEST(CheckpointStore, InlineRecordsOfEarlierVersionsAreStillRead) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db) << db.err().describe();
  const auto old = make_round(0, 3, 50);
  ASSERT_FALSE((*db)->commit(
      {{column::fragments, "f/00000000/r/0000000000000003", checkpoint_store::encode(checkpoint_view::of(old))},
       {column::manifest, "latest/00000000", "3"}}));
  checkpoint_store store(**db, 3);
  auto latest = store.latest(0);
  ASSERT_TRUE(latest && latest->has_value()) << (latest ? "none" : latest.err().describe());
  EXPECT_TRUE(same_bits((*latest)->theta, old.theta));
  ASSERT_FALSE(store.commit(make_round(0, 4, 50)));
  EXPECT_EQ((*store.latest(0))->round, 4u);
}

TEST(RegistryStore, TheSnapshotSurvivesAReopen) {
  testing::temp_dir dir;
  registry_snapshot snap;
  snap.cluster_id = "abc";
  snap.config_toml = "[run]\nsteps = 3\n";
  snap.epoch = 5;
  snap.next_node_id = 3;
  snap.run_state = "training";
  snap.placements = {"node/1", ""};
  snap.finished = {"worker/1.0"};
  snap.keeper_groups[0].replica_keeper = "node/1";
  snap.keeper_groups[0].second_replica_keeper = "node/2";
  snap.keeper_groups[0].second_replica_keeper_number = 4;  // after a hand-over
  snap.keeper_groups[0].incoming_keeper = "node/3";
  snap.keeper_groups[0].incoming_keeper_number = 5;
  snap.keeper_groups[0].incoming_for = 1;
  // A second keeper group, spreading its first replica to node/4.
  snap.keeper_groups.push_back({"node/2", 7, "node/3", 8, "node/4", 9, 1, true});
  snap.next_keeper_number = 10;
  snap.members.push_back(
      {1, "active", "host", 42, {"cpu"}, {"worker/1.0"}, {1}, true, "tcp://10.0.0.2:7071", "node-key"});
  snap.data_cursor = std::string("ATDC\0\x01binary", 12);  // opaque bytes, NULs included
  {
    auto db = open_rocksdb_store(dir.sub("db"));
    ASSERT_TRUE(db);
    registry_store store(**db);
    ASSERT_FALSE(store.load()->has_value());
    ASSERT_FALSE(store.save(snap));
  }
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db);
  registry_store store(**db);
  auto loaded = store.load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->cluster_id, "abc");
  EXPECT_EQ((*loaded)->epoch, 5u);
  EXPECT_EQ((*loaded)->run_state, "training");
  EXPECT_EQ((*loaded)->placements, (std::vector<std::string>{"node/1", ""}));
  EXPECT_EQ((*loaded)->finished, std::vector<std::string>{"worker/1.0"});
  EXPECT_EQ((*loaded)->keeper_groups[0].replica_keeper, "node/1");
  EXPECT_EQ((*loaded)->keeper_groups[0].second_replica_keeper, "node/2");
  EXPECT_EQ((*loaded)->keeper_groups[0].replica_keeper_number, 1u);
  EXPECT_EQ((*loaded)->keeper_groups[0].second_replica_keeper_number, 4u);
  EXPECT_EQ((*loaded)->keeper_groups[0].incoming_keeper, "node/3");
  EXPECT_EQ((*loaded)->keeper_groups[0].incoming_keeper_number, 5u);
  EXPECT_EQ((*loaded)->keeper_groups[0].incoming_for, 1u);
  EXPECT_EQ((*loaded)->keeper_groups, snap.keeper_groups);
  EXPECT_EQ((*loaded)->next_keeper_number, 10u);
  EXPECT_TRUE((*loaded)->members[0].can_keep);
  ASSERT_EQ((*loaded)->members.size(), 1u);
  EXPECT_EQ((*loaded)->members[0].workers, std::vector<std::string>{"worker/1.0"});
  EXPECT_EQ((*loaded)->members[0].ranks, std::vector<std::uint32_t>{1});
  EXPECT_EQ((*loaded)->members[0].data_endpoint, "tcp://10.0.0.2:7071");
  EXPECT_EQ((*loaded)->members[0].public_key, "node-key");
  EXPECT_EQ((*loaded)->data_cursor, snap.data_cursor);
}

TEST(RegistryStore, ASaveWritesTheRunAndOnlyTheMembersThatChangedAndForgetsNothingOnAFailedBatch) {
  testing::refusing_store kv(errc::storage_failure, "disk full");
  registry_snapshot snap;
  snap.cluster_id = "c";
  for (std::uint32_t id = 1; id <= 100; ++id)
    snap.members.push_back({id, "active", "host", id, {"cpu"}, {}, {}, false, "", "key"});
  registry_store store(kv);
  std::size_t written = 0;
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(written, 100u) << "the first save writes every member";
  EXPECT_EQ(kv.last_batch, 102u) << "the registry's record, the run's and the members";
  snap.epoch = 2;
  snap.members.push_back({101, "active", "host", 101, {"cpu"}, {}, {}, false, "", "key"});
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(written, 1u) << "a join writes the registry's record and its member";
  EXPECT_EQ(kv.last_batch, 2u) << "and not the run's config again";
  snap.epoch = 3;
  snap.members[6].state = "dead";
  kv.refuse = true;
  EXPECT_TRUE(store.save(snap, &written));
  kv.refuse = false;
  snap.epoch = 4;
  snap.members[7].state = "left";
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(written, 2u) << "the member of the failed batch is written with the next";
  EXPECT_EQ(store.written().saves, 3u) << "the failed batch is not counted";
  snap.config_toml = "[run]\nsteps = 7\n";
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(kv.last_batch, 2u) << "a new config is written with the registry's record";
  snap.data_cursor = "cursor bytes";
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(kv.last_batch, 2u) << "a changed data cursor is written with the registry's record";
  ASSERT_FALSE(store.save(snap, &written));
  EXPECT_EQ(kv.last_batch, 1u) << "an unchanged one is not";
  EXPECT_EQ(store.written().members, 103u);
  EXPECT_GT(store.written().bytes, 0u);
  // A store that loads what is on disk starts from it, and what it reads is the whole state.
  registry_store reader(kv);
  auto loaded = reader.load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->epoch, 4u);
  EXPECT_EQ((*loaded)->config_toml, "[run]\nsteps = 7\n");
  ASSERT_EQ((*loaded)->members.size(), 101u);
  EXPECT_EQ((*loaded)->members[6].state, "dead");
  EXPECT_EQ((*loaded)->members[7].state, "left");
  EXPECT_EQ((*loaded)->data_cursor, "cursor bytes");
  ASSERT_FALSE(reader.save(**loaded, &written));
  EXPECT_EQ(written, 0u) << "nothing changed since the load";
}

// The data cursor's parts: each written when it changed, erased when gone, read back with
// its header; a failed batch forgets nothing (the part is written with the next).
TEST(RegistryStore, ADataCursorPartIsWrittenWhenItChangedAndErasedWhenGone) {
  testing::refusing_store kv(errc::storage_failure, "disk full");
  registry_snapshot snap;
  snap.cluster_id = "c";
  snap.data_cursor = "header";
  snap.data_cursor_parts = {{"0/0", "bucket zero"}, {"0/1", "bucket one"}};
  registry_store store(kv);
  ASSERT_FALSE(store.save(snap));
  EXPECT_EQ(kv.last_batch, 5u) << "the registry's record, the run's, the header and both parts";
  snap.data_cursor = "header 2";
  snap.data_cursor_parts["0/1"] = "bucket one, changed";
  kv.refuse = true;
  EXPECT_TRUE(store.save(snap));
  kv.refuse = false;
  ASSERT_FALSE(store.save(snap));
  EXPECT_EQ(kv.last_batch, 3u) << "the registry's record, the header and the changed part";
  ASSERT_FALSE(store.save(snap));
  EXPECT_EQ(kv.last_batch, 1u) << "nothing of the cursor when it did not change";
  snap.data_cursor_parts.erase("0/0");
  snap.data_cursor_parts["0/2"] = "bucket two";
  ASSERT_FALSE(store.save(snap));
  EXPECT_EQ(kv.last_batch, 3u) << "the registry's record, the new part and the one gone";
  registry_store reader(kv);
  auto loaded = reader.load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->data_cursor, "header 2");
  EXPECT_EQ((*loaded)->data_cursor_parts, snap.data_cursor_parts);
  ASSERT_FALSE(reader.save(**loaded));
  EXPECT_EQ(kv.last_batch, 1u) << "nothing of the cursor changed since the load";
}

TEST(RegistryStore, ASnapshotFromBeforeHandOversReadsItsReplicasAsKeeperOneAndTwo) {
  testing::temp_dir dir;
  auto db = open_rocksdb_store(dir.sub("db"));
  ASSERT_TRUE(db);
  ASSERT_FALSE(
      (*db)->commit({{column::meta, "registry",
                      R"({"cluster_id":"c","config_toml":"","epoch":2,"next_node_id":3,"next_rank":0,)"
                      R"("run_state":"training","replica_keeper":"node/1","second_replica_keeper":"node/2"})"}}));
  auto loaded = registry_store(**db).load();
  ASSERT_TRUE(loaded && loaded->has_value());
  EXPECT_EQ((*loaded)->keeper_groups[0].replica_keeper_number, 1u);
  EXPECT_EQ((*loaded)->keeper_groups[0].second_replica_keeper_number, 2u);
  EXPECT_EQ((*loaded)->keeper_groups[0].incoming_for, 0u);
  EXPECT_EQ((*loaded)->next_keeper_number, 3u);
}

TEST(RocksDbStore, OpeningAnUnusablePathIsATypedError) {
  auto db = open_rocksdb_store("/proc/atoll-cannot-create-here/db");
  ASSERT_FALSE(db);
  EXPECT_EQ(db.err().code, errc::storage_failure);
}

}  // namespace
}  // namespace atl
