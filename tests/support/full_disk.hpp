#pragma once
// A small tmpfs for full-disk tests (mounting needs root: tests skip, saying so, without it)
// and a filler that writes until the file system refuses.
#include <sys/mount.h>

#include <cstdio>
#include <string>
#include <vector>

namespace atl::testing {

class tmpfs_mount {
 public:
  tmpfs_mount(const std::string& path, const char* size) : path_(path) {
    const std::string opts = std::string("size=") + size;
    mounted_ = ::mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) == 0;
  }
  ~tmpfs_mount() {
    if (mounted_) ::umount2(path_.c_str(), MNT_DETACH);
  }
  tmpfs_mount(const tmpfs_mount&) = delete;
  tmpfs_mount& operator=(const tmpfs_mount&) = delete;
  bool mounted() const { return mounted_; }

 private:
  std::string path_;
  bool mounted_ = false;
};

// Writes 1 MiB blocks to `file` until the file system refuses; returns the bytes written.
inline std::size_t fill(const std::string& file) {
  std::FILE* f = std::fopen(file.c_str(), "wb");
  if (!f) return 0;
  std::vector<char> block(1 << 20, 'x');
  std::size_t total = 0;
  while (true) {
    const std::size_t n = std::fwrite(block.data(), 1, block.size(), f);
    total += n;
    if (n < block.size() || std::fflush(f) != 0) break;
  }
  std::fclose(f);
  return total;
}

}  // namespace atl::testing
