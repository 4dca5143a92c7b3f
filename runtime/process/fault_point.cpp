#include "runtime/process/fault_point.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <kj/debug.h>

namespace atl {
namespace {

struct armed_point {
  std::string name;  // empty: nothing armed
  long at = 1;  // which pass kills
};

// NAME[@N] from the environment variable `var`; a malformed N arms nothing (and says so).
armed_point parse_point(const char* var) {
  armed_point p;
  const char* spec = std::getenv(var);
  if (!spec || !*spec) return p;
  std::string text = spec;
  const auto at = text.find('@');
  p.name = text.substr(0, at);
  if (at != std::string::npos) {
    char* end = nullptr;
    p.at = std::strtol(text.c_str() + at + 1, &end, 10);
    if (*end != '\0' || p.at < 1) {
      std::fprintf(stderr, "%s=%s: the pass after '@' must be a number >= 1; nothing armed\n", var, spec);
      p.name.clear();
    }
  }
  return p;
}

// Parsed once from ATOLL_FAULT_POINT=NAME[@N].
const armed_point& armed() {
  static const armed_point point = parse_point("ATOLL_FAULT_POINT");
  return point;
}

// The throwing point: from ATOLL_THROW_POINT, or armed by a test; passes counted under the
// lock. Every message of every role passes here: while nothing is armed (always, outside
// tests) a pass reads one atomic and takes no lock.
struct throw_point {
  std::mutex mu;
  armed_point point = parse_point("ATOLL_THROW_POINT");
  long passes = 0;
  std::atomic<bool> armed{!point.name.empty()};
};
throw_point& throwing() {
  static throw_point t;
  return t;
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

void pass_throw_point(const char* name) {
  auto& t = throwing();
  if (!t.armed.load(std::memory_order_relaxed)) return;
  long at = 0;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    if (t.point.name.empty() || t.point.name != name) return;
    if (++t.passes != t.point.at) return;
    at = t.point.at;
  }
  std::fprintf(stderr, "throw point %s reached (pass %ld): throwing\n", name, at);
  KJ_FAIL_REQUIRE("throw point reached", name);
}

void arm_throw_point(const std::string& name, long at) {
  auto& t = throwing();
  std::lock_guard<std::mutex> lock(t.mu);
  t.point = armed_point{name, at};
  t.passes = 0;
  t.armed = !name.empty();
}

bool fail_point_armed(const char* name) {
  static const std::string armed_name = [] {
    const char* spec = std::getenv("ATOLL_FAIL_POINT");
    return std::string(spec ? spec : "");
  }();
  return !armed_name.empty() && armed_name == name;
}

}  // namespace atl
