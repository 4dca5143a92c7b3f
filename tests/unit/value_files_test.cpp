// storage/value_files: fragment records written once, whole and durable, under their name.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "storage/value_files.hpp"
#include "tests/support/test_dir.hpp"

namespace atl {
namespace {

namespace fs = std::filesystem;

ino_t inode_of(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

std::set<std::string> names_in(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

TEST(ValueFiles, AFileIsWrittenWholeUnderItsNameWithNothingLeftBeside) {
  testing::temp_dir dir;
  const std::string values = dir.sub("values");  // created on first write
  std::string bytes(3 << 20, '\0');
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
  ASSERT_FALSE(value_files::write_durably(values, "a.atck", bytes));
  EXPECT_EQ(names_in(values), std::set<std::string>{"a.atck"});
  auto back = value_files::read(values, "a.atck");
  ASSERT_TRUE(back) << back.err().describe();
  EXPECT_EQ(*back, bytes);
  // Written again with other bytes: replaced whole.
  ASSERT_FALSE(value_files::write_durably(values, "a.atck", "short"));
  EXPECT_EQ(*value_files::read(values, "a.atck"), "short");
}

TEST(ValueFiles, PiecesThatLieApartAreWrittenAsOneFileInTheirOrder) {
  testing::temp_dir dir;
  const std::string header = "head";
  std::vector<float> theta(1 << 18, 1.5f), momentum(1 << 18, -2.0f);  // 1 MiB each
  const std::uint64_t trailer = 0x0123456789abcdefULL;
  ASSERT_FALSE(value_files::write_durably(dir.str(), "r.atck",
                                          {{header.data(), header.size()},
                                           {theta.data(), theta.size() * sizeof(float)},
                                           {nullptr, 0},  // an empty piece is skipped
                                           {momentum.data(), momentum.size() * sizeof(float)},
                                           {&trailer, sizeof trailer}}));
  std::string joined = header;
  joined.append(reinterpret_cast<const char*>(theta.data()), theta.size() * sizeof(float));
  joined.append(reinterpret_cast<const char*>(momentum.data()), momentum.size() * sizeof(float));
  joined.append(reinterpret_cast<const char*>(&trailer), sizeof trailer);
  auto back = value_files::read(dir.str(), "r.atck");
  ASSERT_TRUE(back) << back.err().describe();
  EXPECT_TRUE(*back == joined);  // not EXPECT_EQ: 2 MiB would be printed on a failure
}

// A spare (a file no record names any more) of exactly the size to write is renamed and
// overwritten in place: the same inode, no block allocated. One of another size, or none,
// and a new file is written. The spare is gone afterwards in every case.
TEST(ValueFiles, ASpareOfTheSizeToWriteIsOverwrittenInPlaceAndAnyOtherIsRemoved) {
  struct row {
    const char* what;
    std::size_t spare_size;  // 0: no spare file on disk
    bool same_inode;
  };
  const std::string bytes(1 << 16, 'n');
  for (const auto& r : {row{"same size", bytes.size(), true}, row{"larger", bytes.size() + 1, false},
                        row{"smaller", 100, false}, row{"missing", 0, false}}) {
    SCOPED_TRACE(r.what);
    testing::temp_dir dir;
    ino_t spare_inode = 0;
    std::ifstream spare_held;  // keeps a removed spare's inode from being reused by the new file
    if (r.spare_size > 0) {
      std::ofstream(dir.sub("old.atck")) << std::string(r.spare_size, 'o');
      spare_inode = inode_of(dir.sub("old.atck"));
      spare_held.open(dir.sub("old.atck"));
    }
    ASSERT_FALSE(value_files::write_durably(dir.str(), "new.atck", {{bytes.data(), bytes.size()}}, "old.atck"));
    EXPECT_EQ(names_in(dir.str()), std::set<std::string>{"new.atck"});
    EXPECT_EQ(*value_files::read(dir.str(), "new.atck"), bytes);
    EXPECT_EQ(inode_of(dir.sub("new.atck")) == spare_inode, r.same_inode);
  }
}

TEST(ValueFiles, AMissingFileIsATypedStorageFailure) {
  testing::temp_dir dir;
  auto missing = value_files::read(dir.str(), "nope.atck");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.err().code, errc::storage_failure);
  EXPECT_NE(missing.err().message.find("nope.atck"), std::string::npos);
}

TEST(ValueFiles, ADirectoryThatCannotBeMadeIsATypedFailureAndWritesNothing) {
  testing::temp_dir dir;
  std::ofstream(dir.sub("plain-file")) << "x";
  auto refused = value_files::write_durably(dir.sub("plain-file") + "/values", "a.atck", "bytes");
  EXPECT_EQ(refused.code, errc::storage_failure) << refused.describe();
}

TEST(ValueFiles, TheSweepRemovesUnlistedAndHalfWrittenFilesOnly) {
  testing::temp_dir dir;
  for (const char* name : {"keep.atck", "orphan.atck", "crashed.atck.tmp"}) std::ofstream(dir.sub(name)) << name;
  value_files::remove_unlisted(dir.str(), {"keep.atck"});
  EXPECT_EQ(names_in(dir.str()), std::set<std::string>{"keep.atck"});
  value_files::remove(dir.str(), "keep.atck");
  value_files::remove(dir.str(), "keep.atck");  // twice: nothing to remove is no error
  EXPECT_TRUE(names_in(dir.str()).empty());
  value_files::remove_unlisted(dir.sub("no-such-dir"), {});  // nothing there: nothing done
}

}  // namespace
}  // namespace atl
