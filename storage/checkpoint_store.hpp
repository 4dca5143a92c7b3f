#pragma once
// Committed fragment state, by (fragment, round), on a kv_store.
//
// Layout: column `fragments`, key "f/<fragment:08x>/r/<round:016x>" -> record;
//         column `manifest`,  key "latest/<fragment:08x>" -> round (decimal).
// A commit writes the record, moves the manifest and prunes round (r - keep_rounds) in
// one atomic, synced batch, so a crash leaves either the old or the new round as latest.
// Records carry a digest of theta and are checked on load (restores are bit-exact).
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
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/kv_store.hpp"

namespace atl {

struct fragment_checkpoint {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::vector<float> theta;  // theta_global of the fragment after the round
  std::vector<float> momentum;  // outer Nesterov buffer, same size as theta
};

// A round to commit, pointing at values the caller keeps alive for the call: a keeper
// writes straight from the frames it received, with no fragment-sized copy in between.
struct checkpoint_view {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  const float* theta = nullptr;
  const float* momentum = nullptr;
  std::size_t count = 0;  // values in theta, and in momentum
  // digest64 of theta when the caller has it (a received frame's checked checksum):
  // then no commit hashes theta again.
  std::optional<std::uint64_t> theta_digest;

  static checkpoint_view of(const fragment_checkpoint& cp);
  std::uint64_t digest_of_theta() const;
  // Whether theta and momentum hold these values.
  bool same_values(const fragment_checkpoint& cp) const;
};

struct checkpoint_summary {
  std::uint32_t fragment;
  std::uint64_t round;
  std::uint64_t epoch;
  std::uint64_t digest;  // digest64 of theta's fp32 bytes
  std::size_t params;
};

// Whether commits reach the disk, for `atollctl status`: a full disk shows up here.
struct storage_health {
  bool failing = false;  // the last commit failed
  std::uint64_t failed_commits = 0;
  std::string last_error;  // of the last failed commit
};

class checkpoint_store {
 public:
  checkpoint_store(kv_store& store, std::uint64_t keep_rounds) : store_(store), keep_(keep_rounds) {}

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
  void remove_unnamed_files();
  expected<std::optional<fragment_checkpoint>> latest(std::uint32_t fragment) const;
  // The latest committed round of a fragment, from the manifest alone (no values read).
  expected<std::optional<std::uint64_t>> latest_round(std::uint32_t fragment) const;
  expected<std::optional<fragment_checkpoint>> load(std::uint32_t fragment, std::uint64_t round) const;
  // Every stored round of every fragment, oldest first; reads no value file.
  expected<std::vector<checkpoint_summary>> list() const;
  // The same (fragment, round) pairs from the keys alone: no value is read or hashed.
  // digest and params are left 0.
  expected<std::vector<checkpoint_summary>> stored_rounds() const;
  // Thread-safe: the keeper commits while the registry reports.
  storage_health health() const;

  static std::string encode(const checkpoint_view& cp);
  static expected<fragment_checkpoint> decode(const std::string& bytes);

 private:
  status write_and_commit(const checkpoint_view& cp);
  // A stored value as encode() wrote it: inline, or read from the file it names.
  expected<std::string> record_bytes(const std::string& stored) const;
  // Writes the record to its file, straight from cp's values; returns the reference the
  // batch stores.
  expected<std::string> write_record_file(const checkpoint_view& cp);
  // Once per store, at the first removal after a commit of its own (so never in a store
  // opened read-only beside a live one): files that no record names (a crash between a
  // file and its batch, or before a pruned round's file was removed).
  void sweep_unlisted_files();

  kv_store& store_;
  std::uint64_t keep_;
  bool committed_ = false;
  bool swept_ = false;
  // Files that committed batches named no longer, by fragment, until remove_unnamed_files().
  std::vector<std::pair<std::uint32_t, std::string>> unnamed_files_;
  // One of them per fragment is kept for that fragment's next record to overwrite
  // (value_files::write_durably with a spare): one record's size of disk per fragment.
  std::map<std::uint32_t, std::string> spare_files_;
  mutable std::mutex health_mu_;
  storage_health health_;  // guarded by health_mu_
};

}  // namespace atl
