#pragma once
// Committed fragment state, by (fragment, round), on a kv_store: full snapshots of the
// state, and between them the round log (storage/round_record.hpp), whose records a read
// replays onto the snapshot before them.
//
// Layout: column `fragments`, key "f/<fragment:08x>/r/<round:016x>" -> snapshot
//                                  (theta, momentum, residual after the round);
//                             key "f/<fragment:08x>/l/<round:016x>" -> round record
//                                  (the round's inputs and the digest it reaches);
//         column `manifest`,  key "latest/<fragment:08x>" -> round (decimal).
// A commit (a snapshot as the new latest round) or an append (a round record) writes the
// value, moves the manifest and prunes in one atomic batch, so a crash leaves either the
// old or the new round as latest. Snapshots carry a digest of their bytes and records a
// checksum, both checked on every read; a replayed round must reach the theta digest its
// record names (restores are bit-exact).
//
// Pruning keeps every round of the last keep_rounds readable: the newest snapshot at or
// before the oldest of them, every snapshot after it, and the log after it. With
// snapshots every snapshot_every rounds that is at most keep_rounds / snapshot_every + 2
// snapshots and the records since the oldest, whatever the run's length.
//
// Durability (storage.sync): `fsync` fdatasyncs every value and batch before it returns;
// `replicated` leaves round records and their batches in the page cache and RocksDB's
// WAL (a process crash loses nothing, a machine crash may lose what this keeper holds,
// and the other keeper, on another node, still holds it). Snapshots are always synced.
//
// On a store with a files directory (RocksDB), the record's bytes go to a file of their
// own first (storage/value_files.hpp: written once, durable before the batch), and the
// batch stores a small reference to it (the file's name, and the round's epoch, theta's
// digest and size, so list() reads no file). A pruned round's file is let go after the
// batch (by a keeper, after it has acknowledged the round): kept as the spare that the
// fragment's next record overwrites in place, or removed. Stores without one (the
// in-memory store of the protocol tests) keep records inline, and inline records written
// by older versions are still read.
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "storage/kv_store.hpp"
#include "storage/round_record.hpp"

namespace atl {

struct fragment_checkpoint {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::vector<float> theta;  // theta_global of the fragment after the round
  std::vector<float> momentum;  // outer Nesterov buffer, same size as theta
  std::vector<float> residual = {};  // the result codec's error feedback; empty: zeros
};

// A round to commit, pointing at values the caller keeps alive for the call: a keeper
// writes straight from the frames it received, with no fragment-sized copy in between.
struct checkpoint_view {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  const float* theta = nullptr;
  const float* momentum = nullptr;
  const float* residual = nullptr;  // null: zeros
  std::size_t count = 0;  // values in theta, momentum and residual
  // digest64 of theta when the caller has it (a received frame's checked checksum):
  // then no commit hashes theta again.
  std::optional<std::uint64_t> theta_digest;

  static checkpoint_view of(const fragment_checkpoint& cp);
  std::uint64_t digest_of_theta() const;
};

struct checkpoint_summary {
  std::uint32_t fragment;
  std::uint64_t round;
  std::uint64_t epoch;
  std::uint64_t digest;  // digest64 of theta's fp32 bytes
  std::size_t params;
};

enum class sync_mode { fsync, replicated };

struct log_options {
  sync_mode sync = sync_mode::fsync;
  std::uint64_t snapshot_every = 10;  // rounds between a keeper's snapshots
};

// A snapshot written off the store's thread (a keeper's snapshots, so that the next
// round's append does not wait behind 200 MB of state): checkpoint_store::begin_snapshot
// checks the round and reserves the file, on the store's thread; write() writes and
// fdatasyncs it on any thread, touching nothing of the store; end_snapshot, on the store's
// thread again, names it in a batch (or lets it go when the write failed or the round was
// replaced meanwhile). Until then the file is the job's: no sweep removes it.
class snapshot_job {
 public:
  void write();
  std::uint32_t fragment() const { return view_.fragment; }
  std::uint64_t round() const { return view_.round; }

 private:
  friend class checkpoint_store;
  fragment_checkpoint owned_;  // the state, when the job holds its own copy
  checkpoint_view view_;  // into owned_, or the caller's values (a snapshot written at once)
  std::uint64_t digest_ = 0;  // of theta
  std::string dir_, name_, spare_;  // dir_ empty: the store keeps values inline
  status written_;
};

struct run_config;
// storage.sync and storage.snapshot_every of a (validated) run configuration.
log_options log_options_for(const run_config& run);

// What a fragment's store holds, for `atollctl checkpoints` and the disk bound.
struct fragment_storage {
  std::uint32_t fragment = 0;
  std::size_t snapshots = 0;
  std::size_t log_records = 0;
  std::uint64_t bytes = 0;  // of snapshots and records together
};

// Whether commits reach the disk, for `atollctl status`: a full disk shows up here.
struct storage_health {
  bool failing = false;  // the last commit failed
  std::uint64_t failed_commits = 0;
  std::string last_error;  // of the last failed commit
  std::uint64_t logged_bytes = 0;  // round records' input bytes appended (commit bytes per keeper)
  std::uint64_t logged_records = 0;
  std::uint64_t replay_mismatches = 0;  // records whose replay here missed their digest
};

class checkpoint_store {
 public:
  checkpoint_store(kv_store& store, std::uint64_t keep_rounds, log_options options = {})
      : store_(store), keep_(keep_rounds), options_(options) {}
  const log_options& options() const { return options_; }
  // Whether a keeper that reached `round` by the log writes a snapshot of it.
  bool snapshot_due(std::uint64_t round) const {
    return options_.snapshot_every > 0 && round % options_.snapshot_every == 0;
  }

  // Refuses a round that is not newer than the latest committed one (S3), with two
  // exceptions. The latest round again with the same bytes is acknowledged without a write
  // (a retry whose ack was lost). The latest round with other bytes from a newer epoch
  // replaces it: a coordinator that died between its keepers' writes left it on some of
  // them only, so it was never released, and its successor is doing that round again.
  status commit(const checkpoint_view& cp);
  status commit(const fragment_checkpoint& cp);
  // commit() in two steps: the round is durable and latest when the first returns, and the
  // files its batch no longer names (the pruned round's, a replaced record's) stay until
  // the second, which keeps one per fragment as the spare its next record overwrites and
  // removes the rest. A keeper acknowledges in between: removing a pruned 128 MiB file
  // took 30 to 100 ms here, time the coordinator waited for. Files left by a crash
  // between the two are swept at the next process's first removal.
  status commit_keeping_files(const checkpoint_view& cp);
  // A round record as the new latest round: it must follow the latest round (not_ready
  // when this store is behind: it could not replay it). The latest round again with the
  // same theta digest is acknowledged without a write (a retry); from a newer epoch with
  // another digest it replaces the latest round (as commit() does).
  status append_keeping_files(const round_record& record);
  // A snapshot of a round this store already holds (a keeper that applied the log),
  // written at once.
  status snapshot_keeping_files(const checkpoint_view& cp);
  // The same in the background (snapshot_job): `state` moves into the job. A refusal
  // (a round this store does not hold) comes before any file is written.
  expected<std::shared_ptr<snapshot_job>> begin_snapshot(fragment_checkpoint state,
                                                         std::optional<std::uint64_t> theta_digest);
  status end_snapshot(snapshot_job& job);
  // Values go to files of their own (RocksDB), not inline (the in-memory store of tests).
  bool writes_files() const { return !store_.files_dir().empty(); }
  void remove_unnamed_files();
  expected<std::optional<fragment_checkpoint>> latest(std::uint32_t fragment) const;
  // The latest committed round of a fragment, from the manifest alone (no values read).
  expected<std::optional<std::uint64_t>> latest_round(std::uint32_t fragment) const;
  // A round's state: its snapshot, or the snapshot before it with the log replayed onto it.
  expected<std::optional<fragment_checkpoint>> load(std::uint32_t fragment, std::uint64_t round) const;
  // What the store says of one round without reading a value file (null: not stored).
  expected<std::optional<checkpoint_summary>> summary(std::uint32_t fragment, std::uint64_t round) const;
  // Snapshots, records and their bytes, by fragment.
  expected<std::vector<fragment_storage>> storage_use() const;
  // Every stored round of every fragment, oldest first; reads no value file.
  expected<std::vector<checkpoint_summary>> list() const;
  // The same (fragment, round) pairs from the keys alone: no value is read or hashed.
  // digest and params are left 0.
  expected<std::vector<checkpoint_summary>> stored_rounds() const;
  // Thread-safe: the keeper commits while the registry reports.
  storage_health health() const;
  // The keeper found a record whose replay misses its logged digest (digest_mismatch).
  void note_replay_mismatch();

  static std::string encode(const checkpoint_view& cp);
  static expected<fragment_checkpoint> decode(const std::string& bytes);

 private:
  status write_and_commit(const checkpoint_view& cp, bool move_manifest, std::vector<std::string> erase);
  void note_health(const status& result);
  // The stored value and the batch that makes it latest, with the manifest moved and the
  // fragment pruned; `erase` keys go too (a replaced round's other form).
  status write_batch(std::uint32_t fragment, std::uint64_t round, const std::string& key, const std::string& value,
                     bool move_manifest, bool sync, std::vector<std::string> erase = {});
  // Keys of the fragment to erase so that the last keep_rounds rounds before `latest` stay
  // readable (see the header).
  expected<std::vector<std::string>> prunable(std::uint32_t fragment, std::uint64_t latest,
                                              const std::string& adding) const;
  expected<std::string> write_log_file(const round_record& record);
  // A stored value as encode() wrote it: inline, or read from the file it names.
  expected<std::string> record_bytes(const std::string& stored) const;
  // Writes the record to its file, straight from cp's values; returns the reference the
  // batch stores.
  expected<std::string> write_record_file(const checkpoint_view& cp);
  // Once per store, at the first removal after a commit of its own (so never in a store
  // opened read-only beside a live one): files that no record names (a crash between a
  // file and its batch, or before a pruned round's file was removed).
  void sweep_unlisted_files();
  // The job for a snapshot of `cp`, its file reserved (begin_snapshot's checks done).
  expected<std::shared_ptr<snapshot_job>> reserve_snapshot(const checkpoint_view& cp);

  kv_store& store_;
  std::uint64_t keep_;
  log_options options_;
  bool committed_ = false;
  bool swept_ = false;
  // Files that committed batches named no longer, by fragment, until remove_unnamed_files().
  std::vector<std::pair<std::pair<std::uint32_t, char>, std::string>> unnamed_files_;
  // Some of them, by fragment and kind (snapshot, round record), are kept for the next
  // values of that kind to overwrite (value_files::write with a spare): a fresh file's
  // pages cost a fault each on these VMs (a new 32 MiB record took 0.13 s to write without
  // fdatasync; see spares_kept()), an overwritten one's are in the page cache already.
  std::map<std::pair<std::uint32_t, char>, std::vector<std::string>> spare_files_;
  std::set<std::string> snapshots_in_flight_;  // files a snapshot_job writes (and its spare): no sweep's
  // How many spares of a kind a fragment keeps: round records are pruned up to
  // snapshot_every at a time, and each round writes one; snapshots one at a time.
  std::size_t spares_kept(char kind) const;
  mutable std::mutex health_mu_;
  storage_health health_;  // guarded by health_mu_
};

}  // namespace atl
