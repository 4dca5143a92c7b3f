#pragma once
// A fresh temporary folder per test, removed afterwards.
#include <ftw.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace atl::testing {

class temp_dir {
 public:
  temp_dir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("atoll-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  // ATOLL_KEEP_TEST_DIRS=1 keeps the logs and run dirs of a failing run for a post-mortem.
  ~temp_dir() {
    if (std::getenv("ATOLL_KEEP_TEST_DIRS")) return;
    // nftw, not std::filesystem::remove_all: PyTorch 2.11's wheel exports its own copy of
    // remove_all, which crashes when a test binary linked to it calls it (seen on the GPU
    // machine; Debian's LibTorch does not).
    nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  }
  std::string str() const { return path_.string(); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  static int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
    std::remove(path);  // a file or an empty folder (depth first, so folders come last)
    return 0;
  }
  std::filesystem::path path_;
};

}  // namespace atl::testing
