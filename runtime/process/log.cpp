#include "runtime/process/log.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace atl {
namespace {

std::mutex log_mu;
std::string log_name = "atoll";
const auto log_start = std::chrono::steady_clock::now();

bool debug_enabled() {
  static const bool enabled = [] {
    const char* v = std::getenv("ATOLL_LOG");
    return v && std::strcmp(v, "debug") == 0;
  }();
  return enabled;
}

void emit(const char* level, const std::string& line) {
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - log_start).count();
  std::lock_guard<std::mutex> lock(log_mu);
  std::fprintf(stderr, "[%8.3f %s]%s %s\n", t, log_name.c_str(), level, line.c_str());
}

}  // namespace

void set_log_name(const std::string& process_name) {
  std::lock_guard<std::mutex> lock(log_mu);
  log_name = process_name;
}
void log_info(const std::string& line) { emit("", line); }
void log_warn(const std::string& line) { emit(" warning:", line); }
void log_error(const std::string& line) { emit(" error:", line); }
void log_debug(const std::string& line) {
  if (debug_enabled()) emit(" debug:", line);
}

}  // namespace atl
