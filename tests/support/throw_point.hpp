#pragma once
// A throwing point (runtime/process/fault_point.hpp) armed for one test: disarmed when the
// test ends, even when an assertion ended it early. A build without ATOLL_FAULT_POINTS has
// no points to arm: the test is skipped, saying so.
#include <string>

#include <gtest/gtest.h>

#include "runtime/process/fault_point.hpp"

namespace atl::testing {

class armed_throw_point {
 public:
  explicit armed_throw_point(const std::string& name, long at = 1) { arm_throw_point(name, at); }
  ~armed_throw_point() { arm_throw_point(""); }
  armed_throw_point(const armed_throw_point&) = delete;
  armed_throw_point& operator=(const armed_throw_point&) = delete;
};

}  // namespace atl::testing

#ifdef ATOLL_FAULT_POINTS
#define ATL_SKIP_WITHOUT_THROW_POINTS() ((void)0)
#else
#define ATL_SKIP_WITHOUT_THROW_POINTS() GTEST_SKIP() << "built without ATOLL_FAULT_POINTS: no throwing points"
#endif
