#pragma once
// Token files for language-model tasks, free of LibTorch: the file read window by window,
// the train/held-out split and the windows a worker reads.
//
// Formats: `bytes`, one token per byte (vocabulary 256), and `u16`, little-endian uint16
// token ids (what nanoGPT's prepare scripts write). The last 10% of the tokens are held
// out for evaluation and never trained on; the first 90% are cut into `world_size`
// contiguous shards, one per worker rank. Windows are read with pread, not mapped: a file
// truncated while a run reads it (rewritten in place, a disk that lost it) then gives a
// typed error instead of SIGBUS, which would take the node's coordinators and keeper down
// with the worker. The file's pages are still shared through the page cache.
//
// Every way a file can be unusable is refused at open with errc::bad_data and a message
// that names the file and the problem: missing, unreadable, empty, a u16 file with an odd
// number of bytes, too short for a window in each shard or in the held-out part, or a
// token id outside the vocabulary. A file that shrinks afterwards is refused by the read
// that misses its bytes (errc::bad_data, the name and both sizes).
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

enum class token_format { bytes, u16 };
expected<token_format> parse_token_format(const std::string& name);  // "bytes" | "u16"
std::size_t token_width(token_format f);  // bytes per token

// Where rank `rank` of `world_size` trains and where everyone evaluates, in tokens.
struct token_split {
  std::uint64_t train_begin = 0, train_end = 0;  // this rank's shard of the first 90%
  std::uint64_t held_begin = 0, held_end = 0;  // the last 10%, the same for every rank
};
token_split split_tokens(std::uint64_t tokens, std::uint64_t rank, std::uint64_t world_size);

// Start offsets (relative to the held-out part) of `windows` evenly spaced windows of
// `window` tokens: every run and every worker evaluates the same tokens.
std::vector<std::uint64_t> held_out_starts(std::uint64_t held_tokens, std::uint64_t window, std::uint64_t windows);

// Refuses a split that leaves a shard or the held-out part without a whole window.
// `path` only names the file in the message.
status check_split(const std::string& path, std::uint64_t tokens, std::uint64_t window, std::uint64_t world_size);

class token_file {
 public:
  // Opens `path`; refuses a missing, empty or wrongly sized file. With `vocab` > 0, also a
  // file holding a token id >= vocab (it reads the file once).
  static expected<token_file> open(const std::string& path, token_format format, std::uint64_t vocab = 0);

  std::uint64_t tokens() const { return tokens_; }
  // Tokens [start, start + count) as int64 into `out`; errc::bad_data when the file no
  // longer holds them (it was truncated after open), errc::storage_failure on a read error.
  status copy(std::uint64_t start, std::uint64_t count, std::int64_t* out) const;
  // The largest token id in the file (computed at open).
  std::uint64_t max_token() const { return max_token_; }
  const std::string& path() const { return path_; }

 private:
  struct descriptor;
  std::shared_ptr<const descriptor> fd_;
  std::string path_;
  token_format format_ = token_format::bytes;
  std::uint64_t tokens_ = 0;
  std::uint64_t max_token_ = 0;
};

// What a language-model task reads: this rank's shard and the held-out windows.
struct token_windows_spec {
  std::string path;
  token_format format = token_format::bytes;
  std::uint64_t vocab = 256;
  std::uint64_t context = 64;  // a window is context + 1 tokens (inputs and shifted targets)
  std::uint64_t batch = 32;
  std::uint64_t eval_batches = 16;
  std::uint64_t rank = 0;
  std::uint64_t world_size = 1;
};

class token_windows {
 public:
  static expected<token_windows> open(const token_windows_spec& spec);

  // `batch` windows from this rank's shard at random starts, as [batch][context + 1]
  // int64 tokens, row-major. Fails as token_file::copy does.
  expected<std::vector<std::int64_t>> sample_train(std::mt19937_64& rng) const;
  // The held-out windows of eval batch b (same layout).
  expected<std::vector<std::int64_t>> held_out_batch(std::uint64_t b) const;
  // The training part as units for the run's data cursor (docs/design.md, "Every sample
  // once"): the non-overlapping windows of the whole first 90%, every rank's shard
  // together; unit u starts at token u (context + 1).
  std::uint64_t train_units() const;
  // The windows of `units` (each below train_units(); refused otherwise, errc::bad_data),
  // laid out as sample_train's.
  expected<std::vector<std::int64_t>> train_windows(const std::vector<std::uint64_t>& units) const;
  const token_windows_spec& spec() const { return spec_; }
  const token_split& split() const { return split_; }

 private:
  token_windows(token_windows_spec spec, token_file file, token_split split)
      : spec_(std::move(spec)), file_(std::move(file)), split_(split) {}
  token_windows_spec spec_;
  token_file file_;
  token_split split_;
  std::vector<std::uint64_t> held_starts_;
};

}  // namespace atl

namespace atl {

struct run_config;

// The vocabulary of a run: run.vocab, else 256 for bytes, else the model's output width
// (`model_vocab`, 0 when the model does not say, as for the built-in GPT). Refuses a
// model whose output width differs from the data's vocabulary (errc::bad_model) and u16
// data without a vocabulary (errc::invalid_config).
expected<std::uint64_t> resolve_vocab(const run_config& cfg, std::uint64_t model_vocab);

// The token windows of worker `rank` of `world_size` under `cfg`: run.data, else
// `default_file` (the example's own data), in run.data_format.
token_windows_spec windows_spec(const run_config& cfg, const std::string& default_file, std::uint64_t vocab,
                                std::uint64_t rank, std::uint64_t world_size);

}  // namespace atl
