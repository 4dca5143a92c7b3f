#include "runtime/device/compute_env.hpp"

#include <malloc.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/process/log.hpp"

namespace atl {

namespace {
constexpr const char* marker = "ATOLL_COMPUTE_ENV";
}

env_settings missing_compute_env(const env_lookup& getenv) {
  auto is_set = [&](const char* name) {
    const char* v = getenv(name);
    return v && *v;
  };
  if (is_set(marker)) return {};
  env_settings add;
  // libgomp: spin ~10k iterations (tens of microseconds) before sleeping, not ~300k. An
  // explicit OMP_WAIT_POLICY is the user's choice of the same thing.
  if (!is_set("GOMP_SPINCOUNT") && !is_set("OMP_WAIT_POLICY")) add.emplace_back("GOMP_SPINCOUNT", "10000");
  // OpenBLAS: an idle thread spins 2^4 cycles, the minimum, before it sleeps.
  if (!is_set("OPENBLAS_THREAD_TIMEOUT")) add.emplace_back("OPENBLAS_THREAD_TIMEOUT", "4");
  if (add.empty()) return {};
  add.emplace_back(marker, "1");
  return add;
}

void tune_allocator_for_training() {
  ::mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest; fixing it ends the dynamic one
  ::mallopt(M_MMAP_MAX, 0);  // larger blocks too: a fragment's frames are reused, not faulted in
  ::mallopt(M_TRIM_THRESHOLD, 512 << 20);
  // One arena for every thread: another thread's arena is a set of mmap'd heaps of at most
  // 64 MiB, unmapped once free, so a fragment-sized block freed there was faulted in
  // again at the next round (about 500k page faults a round on the averaging bench).
  ::mallopt(M_ARENA_MAX, 1);
}

void reexec_with_compute_env(char** argv) {
  const auto add = missing_compute_env([](const char* name) { return std::getenv(name); });
  if (add.empty()) return;
  for (const auto& [name, value] : add) ::setenv(name.c_str(), value.c_str(), 1);
  // The resolved path, not /proc/self/exe: the process keeps its name (ps, top).
  char self[4096];
  const auto n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    ::execv(self, argv);
  }
  log_warn(std::string("could not re-execute with the compute environment (") + std::strerror(errno) +
           "): idle LibTorch and BLAS threads keep spinning");
}

}  // namespace atl
