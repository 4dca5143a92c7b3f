#pragma once
// A fresh temporary folder per test, removed afterwards.
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
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string sub(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace atl::testing
