#include "runtime/process/fault_point.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace atl {
namespace {

struct armed_point {
  std::string name;  // empty: nothing armed
  long at = 1;  // which pass kills
};

// Parsed once from ATOLL_FAULT_POINT=NAME[@N]; a malformed N arms nothing (and says so).
const armed_point& armed() {
  static const armed_point point = [] {
    armed_point p;
    const char* spec = std::getenv("ATOLL_FAULT_POINT");
    if (!spec || !*spec) return p;
    std::string text = spec;
    const auto at = text.find('@');
    p.name = text.substr(0, at);
    if (at != std::string::npos) {
      char* end = nullptr;
      p.at = std::strtol(text.c_str() + at + 1, &end, 10);
      if (*end != '\0' || p.at < 1) {
        std::fprintf(stderr, "ATOLL_FAULT_POINT=%s: the pass after '@' must be a number >= 1; nothing armed\n", spec);
        p.name.clear();
      }
    }
    return p;
  }();
  return point;
}

}  // namespace

void hit_fault_point(const char* name) {
  static std::atomic<long> passes{0};
  const auto& point = armed();
  if (point.name.empty() || point.name != name) return;
  if (++passes != point.at) return;
  std::fprintf(stderr, "fault point %s reached (pass %ld): SIGKILL\n", name, point.at);
  std::fflush(stderr);
  std::raise(SIGKILL);
}

bool fail_point_armed(const char* name) {
  static const std::string armed_name = [] {
    const char* spec = std::getenv("ATOLL_FAIL_POINT");
    return std::string(spec ? spec : "");
  }();
  return !armed_name.empty() && armed_name == name;
}

}  // namespace atl
