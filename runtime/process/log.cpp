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

enum class level { debug, info, warn, error };

// ATOLL_LOG: debug, info (the default), warn or error: the least severe level written.
level threshold() {
  static const level least = [] {
    const char* v = std::getenv("ATOLL_LOG");
    if (!v) return level::info;
    if (std::strcmp(v, "debug") == 0) return level::debug;
    if (std::strcmp(v, "warn") == 0) return level::warn;
    if (std::strcmp(v, "error") == 0) return level::error;
    return level::info;
  }();
  return least;
}

void emit(level severity, const char* tag, const std::string& line) {
  if (severity < threshold()) return;
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - log_start).count();
  std::lock_guard<std::mutex> lock(log_mu);
  std::fprintf(stderr, "[%8.3f %s]%s %s\n", t, log_name.c_str(), tag, line.c_str());
}

}  // namespace

void set_log_name(const std::string& process_name) {
  std::lock_guard<std::mutex> lock(log_mu);
  log_name = process_name;
}
void log_info(const std::string& line) { emit(level::info, "", line); }
void log_warn(const std::string& line) { emit(level::warn, " warning:", line); }
void log_error(const std::string& line) { emit(level::error, " error:", line); }
void log_debug(const std::string& line) { emit(level::debug, " debug:", line); }

}  // namespace atl
