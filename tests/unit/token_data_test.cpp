// Token files: both formats, the split (disjoint shards, a held-out part never trained
// on), and every bad file refused with its name and the problem.
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>

#include <gtest/gtest.h>

#include "runtime/process/config.hpp"
#include "tests/support/test_dir.hpp"
#include "training/token_data.hpp"

namespace atl {
namespace {

std::string write_file(const testing::temp_dir& dir, const std::string& name, const std::string& bytes) {
  const auto path = dir.sub(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// Token i is i mod 251 (bytes) or i mod 60000 (u16): every token says where it came from.
std::string numbered_bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<char>(i % 251);
  return s;
}
std::string numbered_u16(std::size_t n) {
  std::string s(2 * n, '\0');
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = static_cast<std::uint16_t>(i % 60000);
    s[2 * i] = static_cast<char>(v & 0xff);
    s[2 * i + 1] = static_cast<char>(v >> 8);
  }
  return s;
}

TEST(TokenFile, ReadsBytesAndLittleEndianU16) {
  testing::temp_dir dir;
  auto bytes = token_file::open(write_file(dir, "b", std::string("\x01\xff\x10", 3)), token_format::bytes);
  ASSERT_TRUE(bytes) << bytes.err().describe();
  EXPECT_EQ(bytes->tokens(), 3u);
  std::int64_t byte = 0;
  ASSERT_FALSE(bytes->copy(1, 1, &byte));
  EXPECT_EQ(byte, 255);
  auto u16 = token_file::open(write_file(dir, "u", std::string("\x01\x00\x34\x12\xff\xff", 6)), token_format::u16);
  ASSERT_TRUE(u16) << u16.err().describe();
  ASSERT_EQ(u16->tokens(), 3u);
  std::int64_t out[3];
  ASSERT_FALSE(u16->copy(0, 3, out));
  EXPECT_EQ(out[0], 1);
  EXPECT_EQ(out[1], 0x1234);
  EXPECT_EQ(out[2], 65535);
  EXPECT_EQ(u16->max_token(), 65535u);
}

TEST(TokenFile, EveryBadFileIsRefusedWithItsNameAndTheProblem) {
  testing::temp_dir dir;
  struct row {
    const char* name;
    std::string path;
    token_format format;
    std::uint64_t vocab;
    const char* problem;
  };
  const std::vector<row> table = {
      {"missing", dir.sub("nope.bin"), token_format::bytes, 0, "cannot open"},
      {"a folder", dir.str(), token_format::bytes, 0, "not a regular file"},
      {"empty", write_file(dir, "empty.bin", ""), token_format::bytes, 0, "empty"},
      {"odd u16", write_file(dir, "odd.bin", "abc"), token_format::u16, 0, "not a whole number of uint16"},
      {"u16 id past vocab", write_file(dir, "big.bin", std::string("\x00\x01\x10\x00", 4)), token_format::u16, 256,
       "token id 256"},
      {"byte past a small vocab", write_file(dir, "small.bin", "az"), token_format::bytes, 100, "token id 122"},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    auto f = token_file::open(r.path, r.format, r.vocab);
    ASSERT_FALSE(f);
    EXPECT_EQ(f.err().code, errc::bad_data);
    EXPECT_NE(f.err().message.find(r.path), std::string::npos) << f.err().message;
    EXPECT_NE(f.err().message.find(r.problem), std::string::npos) << f.err().message;
  }
}

// A data file rewritten in place while a run reads it used to be mapped, and a read past
// its new end raised SIGBUS, which killed the node with its coordinators and keeper.
TEST(TokenFile, AFileTruncatedAfterOpenGivesATypedErrorAndARenamedReplacementIsNotSeen) {
  testing::temp_dir dir;
  const std::size_t n = 20000;
  token_windows_spec spec;
  spec.path = write_file(dir, "tokens", numbered_bytes(n));
  spec.context = 16;
  spec.batch = 4;
  spec.eval_batches = 2;
  auto w = token_windows::open(spec);
  ASSERT_TRUE(w) << w.err().describe();
  std::mt19937_64 rng(1);
  ASSERT_TRUE(w->sample_train(rng));

  // Renamed over: the open file is the old one, whole; reads go on unchanged.
  const auto before = *w->held_out_batch(1);
  const auto replacement = write_file(dir, "replacement", std::string(n, '\x07'));
  ASSERT_EQ(std::rename(replacement.c_str(), spec.path.c_str()), 0);
  const auto after_rename = w->held_out_batch(1);
  ASSERT_TRUE(after_rename) << after_rename.err().describe();
  EXPECT_EQ(*after_rename, before);

  // Truncated in place (the same inode, as `> file` or a crashed copy leaves it).
  auto same_inode = token_windows::open(spec);
  ASSERT_TRUE(same_inode) << same_inode.err().describe();
  ASSERT_EQ(::truncate(spec.path.c_str(), static_cast<off_t>(n / 100)), 0);
  const auto held = same_inode->held_out_batch(0);  // the held-out part is past the new end
  ASSERT_FALSE(held);
  EXPECT_EQ(held.err().code, errc::bad_data);
  EXPECT_NE(held.err().message.find(spec.path), std::string::npos) << held.err().message;
  EXPECT_NE(held.err().message.find("shrank"), std::string::npos) << held.err().message;
  EXPECT_NE(held.err().message.find(std::to_string(n) + " bytes at open, " + std::to_string(n / 100) + " now"),
            std::string::npos)
      << held.err().message;
  bool refused = false;  // training windows start anywhere in the shard; most are gone
  for (int i = 0; i < 20 && !refused; ++i) refused = !same_inode->sample_train(rng);
  EXPECT_TRUE(refused);
}

TEST(TokenSplit, ShardsAreDisjointAndNoneReachesTheHeldOutTenPercent) {
  for (std::uint64_t world : {1u, 2u, 3u, 7u}) {
    SCOPED_TRACE(world);
    std::uint64_t previous_end = 0;
    for (std::uint64_t rank = 0; rank < world; ++rank) {
      const auto s = split_tokens(10007, rank, world);
      EXPECT_EQ(s.train_begin, previous_end) << "contiguous, disjoint shards";
      EXPECT_LE(s.train_end, s.held_begin);
      EXPECT_EQ(s.held_begin, 10007u * 9 / 10);
      EXPECT_EQ(s.held_end, 10007u);
      previous_end = s.train_end;
    }
  }
}

TEST(TokenSplit, TooShortForAWindowIsRefused) {
  struct row {
    std::uint64_t tokens, window, world;
    bool ok;
  };
  const std::vector<row> table = {
      {1000, 65, 2, true},  // shards of 450, 100 held out
      {1000, 65, 7, true},  // shards of 128
      {1000, 65, 14, false},  // shards of 64 < a window
      {600, 65, 1, false},  // 60 held out < a window
      {0, 65, 1, false},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(std::to_string(r.tokens) + " tokens, " + std::to_string(r.world) + " workers");
    const auto err = check_split("f.txt", r.tokens, r.window, r.world);
    EXPECT_EQ(!err, r.ok) << err.describe();
    if (err) {
      EXPECT_EQ(err.code, errc::bad_data);
    }
  }
}

TEST(TokenWindows, AWindowIsConsecutiveTokensInBothFormats) {
  testing::temp_dir dir;
  for (auto format : {token_format::bytes, token_format::u16}) {
    SCOPED_TRACE(format == token_format::u16 ? "u16" : "bytes");
    const std::size_t n = 20000;
    token_windows_spec spec;
    spec.path = write_file(dir, "tokens", format == token_format::u16 ? numbered_u16(n) : numbered_bytes(n));
    spec.format = format;
    spec.vocab = format == token_format::u16 ? 60000 : 256;
    spec.context = 16;
    spec.batch = 4;
    spec.eval_batches = 3;
    spec.world_size = 3;
    std::set<std::uint64_t> eval_positions;
    for (std::uint64_t rank = 0; rank < 3; ++rank) {
      spec.rank = rank;
      auto w = token_windows::open(spec);
      ASSERT_TRUE(w) << w.err().describe();
      std::mt19937_64 rng(rank);
      const std::uint64_t mod = format == token_format::u16 ? 60000 : 251;
      for (int b = 0; b < 50; ++b) {
        const auto sampled = w->sample_train(rng);
        ASSERT_TRUE(sampled) << sampled.err().describe();
        const auto& batch = *sampled;
        ASSERT_EQ(batch.size(), 4u * 17u);
        for (std::size_t row = 0; row < 4; ++row)  // a window is consecutive tokens of the file
          for (std::size_t k = 1; k < 17; ++k)
            EXPECT_EQ(static_cast<std::uint64_t>(batch[row * 17 + k]),
                      (static_cast<std::uint64_t>(batch[row * 17]) + k) % mod);
      }
      for (std::uint64_t b = 0; b < 3; ++b) {
        const auto batch = w->held_out_batch(b);
        ASSERT_TRUE(batch) << batch.err().describe();
        ASSERT_EQ(batch->size(), 4u * 17u);
        eval_positions.insert(static_cast<std::uint64_t>((*batch)[0]));
      }
    }
    EXPECT_GT(eval_positions.size(), 1u) << "evenly spaced, not one window repeated";
  }
}

// A u16 file whose token at each position is the position itself (n < 60000), read in
// windows of 9 tokens.
token_windows_spec numbered_u16_spec(const testing::temp_dir& dir, std::size_t n) {
  token_windows_spec spec;
  spec.path = write_file(dir, "u16", numbered_u16(n));
  spec.format = token_format::u16;
  spec.vocab = 60000;
  spec.context = 8;
  return spec;
}

TEST(TokenWindows, EveryRankEvaluatesTheSameTokensAndTrainsOnlyBeforeTheHeldOutPart) {
  testing::temp_dir dir;
  const std::size_t n = 30000;
  auto spec = numbered_u16_spec(dir, n);
  spec.batch = 8;
  spec.eval_batches = 4;
  spec.world_size = 2;
  std::vector<std::vector<std::int64_t>> evals;
  for (std::uint64_t rank = 0; rank < 2; ++rank) {
    spec.rank = rank;
    auto w = token_windows::open(spec);
    ASSERT_TRUE(w) << w.err().describe();
    std::mt19937_64 rng(42);
    for (int b = 0; b < 200; ++b) {
      const auto batch = w->sample_train(rng);
      ASSERT_TRUE(batch) << batch.err().describe();
      for (auto token : *batch) {
        EXPECT_GE(static_cast<std::uint64_t>(token), w->split().train_begin);
        EXPECT_LT(static_cast<std::uint64_t>(token), w->split().train_end) << "inside this rank's shard";
      }
    }
    evals.push_back(*w->held_out_batch(3));
    for (auto token : evals.back()) EXPECT_GE(static_cast<std::uint64_t>(token), n * 9 / 10) << "held out";
  }
  EXPECT_EQ(evals[0], evals[1]);
}

// The units of the data cursor: the non-overlapping windows of the whole training part,
// the same whatever the rank, each read where its number says, and none past the end.
TEST(TokenWindows, TheCursorsUnitsTileTheTrainingPartWhateverTheRank) {
  testing::temp_dir dir;
  const std::size_t n = 30000;
  auto spec = numbered_u16_spec(dir, n);
  spec.world_size = 3;
  for (std::uint64_t rank = 0; rank < 3; ++rank) {
    spec.rank = rank;
    auto w = token_windows::open(spec);
    ASSERT_TRUE(w) << w.err().describe();
    const auto whole = split_tokens(n, 0, 1);
    EXPECT_EQ(w->train_units(), (whole.train_end - whole.train_begin) / 9) << "rank " << rank;
    const auto last = w->train_units() - 1;
    const auto windows = w->train_windows({0, 5, last});
    ASSERT_TRUE(windows) << windows.err().describe();
    ASSERT_EQ(windows->size(), 3u * 9u);
    const std::uint64_t starts[] = {whole.train_begin, whole.train_begin + 5 * 9, whole.train_begin + last * 9};
    for (std::size_t row = 0; row < 3; ++row)
      for (std::size_t k = 0; k < 9; ++k)
        EXPECT_EQ(static_cast<std::uint64_t>((*windows)[row * 9 + k]), starts[row] + k);
    EXPECT_LE(starts[2] + 9, whole.train_end) << "the last unit ends inside the training part";
    const auto past = w->train_windows({w->train_units()});
    ASSERT_FALSE(past);
    EXPECT_EQ(past.err().code, errc::bad_data);
  }
}

TEST(ResolveVocab, TheDataAndTheModelMustAgree) {
  struct row {
    const char* name;
    const char* format;
    std::int64_t vocab;
    std::uint64_t model_vocab;
    std::uint64_t want;
    errc refused;
  };
  const std::vector<row> table = {
      {"bytes, built-in model", "bytes", 0, 0, 256, errc::none},
      {"bytes, a model with 256 logits", "bytes", 0, 256, 256, errc::none},
      {"bytes, a model with 300 logits", "bytes", 0, 300, 0, errc::bad_model},
      {"u16, the model says", "u16", 0, 50304, 50304, errc::none},
      {"u16, --vocab and the model agree", "u16", 50304, 50304, 50304, errc::none},
      {"u16, --vocab and the model differ", "u16", 50257, 50304, 0, errc::bad_model},
      {"u16, built-in model needs --vocab", "u16", 0, 0, 0, errc::invalid_config},
      {"u16, built-in model with --vocab", "u16", 1000, 0, 1000, errc::none},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    run_config cfg;
    cfg.data_format = r.format;
    cfg.vocab = r.vocab;
    auto got = resolve_vocab(cfg, r.model_vocab);
    if (r.refused != errc::none) {
      ASSERT_FALSE(got);
      EXPECT_EQ(got.err().code, r.refused);
    } else {
      ASSERT_TRUE(got) << got.err().describe();
      EXPECT_EQ(*got, r.want);
    }
  }
}

}  // namespace
}  // namespace atl
