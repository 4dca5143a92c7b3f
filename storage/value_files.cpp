#include "storage/value_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace atl::value_files {
namespace {

namespace fs = std::filesystem;

// Room kept free besides a file: the RocksDB record that names it and its WAL.
constexpr std::uint64_t free_space_reserve = 4u << 20;

error disk_full(const std::string& where, const std::string& detail) {
  return make_error(errc::storage_full, "commit: the disk is full (" + detail + " in " + where +
                                            "); nothing was written, and commits resume by themselves once "
                                            "space is freed");
}

error failure(const std::string& what, const std::string& path, int err) {
  if (err == ENOSPC) return disk_full(path, std::strerror(err));
  return make_error(errc::storage_failure, what + " " + path + ": " + std::strerror(err));
}

status check_free_space(const std::string& dir, std::uint64_t needed) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return {};  // unknown: let the write try
  const std::uint64_t available = static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
  if (available >= needed) return {};
  return disk_full(dir, std::to_string(available >> 10) + " KiB free, " + std::to_string(needed >> 10) + " KiB needed");
}

status sync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return failure("open", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  return rc == 0 ? status{} : failure("fsync", dir, err);
}

// writev until every piece is written (a call may write less than asked), then fdatasync
// if `flush`.
status write_all(int fd, std::vector<iovec> left, const std::string& path, bool flush) {
  std::size_t first = 0;
  while (first < left.size()) {
    const auto count = static_cast<int>(std::min<std::size_t>(left.size() - first, IOV_MAX));
    const auto n = ::writev(fd, left.data() + first, count);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return failure("write", path, errno);
    if (n == 0) return failure("write", path, EIO);  // no progress: never loop on it
    auto written = static_cast<std::size_t>(n);
    while (first < left.size() && written >= left[first].iov_len) written -= left[first++].iov_len;
    if (first < left.size()) {
      left[first].iov_base = static_cast<char*>(left[first].iov_base) + written;
      left[first].iov_len -= written;
    }
  }
  if (flush && ::fdatasync(fd) != 0) return failure("fdatasync", path, errno);
  return {};
}

// Renames SPARE to TMP if it holds exactly `size` bytes, else removes it.
bool reuse_spare(const std::string& spare, std::uint64_t size, const std::string& tmp) {
  struct stat st {};
  if (::stat(spare.c_str(), &st) == 0 && S_ISREG(st.st_mode) && static_cast<std::uint64_t>(st.st_size) == size &&
      ::rename(spare.c_str(), tmp.c_str()) == 0)
    return true;
  ::unlink(spare.c_str());
  return false;
}

}  // namespace

status write_durably(const std::string& dir, const std::string& name, const std::vector<piece>& pieces) {
  return write_durably(dir, name, pieces, {});
}

status write_durably(const std::string& dir, const std::string& name, const std::vector<piece>& pieces,
                     const std::string& spare) {
  return write(dir, name, pieces, spare, true);
}

status write(const std::string& dir, const std::string& name, const std::vector<piece>& pieces,
             const std::string& spare, bool flush) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return make_error(errc::storage_failure, "create " + dir + ": " + ec.message());
  std::uint64_t total = 0;
  std::vector<iovec> vecs;
  for (const auto& p : pieces) {
    total += p.size;
    if (p.size > 0) vecs.push_back({const_cast<void*>(p.data), p.size});  // writev only reads them
  }
  const std::string path = dir + "/" + name;
  const std::string tmp = path + ".tmp";
  const bool reused = !spare.empty() && reuse_spare(dir + "/" + spare, total, tmp);
  if (auto err = check_free_space(dir, (reused ? 0 : total) + free_space_reserve)) {
    if (reused) ::unlink(tmp.c_str());
    return err;
  }
  const int fd = reused ? ::open(tmp.c_str(), O_WRONLY | O_CLOEXEC)
                        : ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return failure(reused ? "open" : "create", tmp, errno);
  auto written = write_all(fd, std::move(vecs), tmp, flush);
  ::close(fd);
  if (!written && ::rename(tmp.c_str(), path.c_str()) != 0) written = failure("rename", tmp, errno);
  if (!written && flush) written = sync_directory(dir);
  if (written) {
    ::unlink(tmp.c_str());
    ::unlink(path.c_str());
  }
  return written;
}

status write_durably(const std::string& dir, const std::string& name, const std::string& bytes) {
  return write_durably(dir, name, std::vector<piece>{{bytes.data(), bytes.size()}});
}

expected<std::string> read(const std::string& dir, const std::string& name) {
  const std::string path = dir + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(errc::storage_failure, "checkpoint file " + path + " is missing or unreadable");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::size_t>(in.tellg());
  in.seekg(0);
  std::string bytes(size, '\0');
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    return make_error(errc::storage_failure, "reading " + path + " failed");
  return bytes;
}

void remove(const std::string& dir, const std::string& name) { ::unlink((dir + "/" + name).c_str()); }

void remove_unlisted(const std::string& dir, const std::set<std::string>& keep) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const auto name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && !keep.count(name)) fs::remove(entry.path(), ec);
  }
}

}  // namespace atl::value_files
