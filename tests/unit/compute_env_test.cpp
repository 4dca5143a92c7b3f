// missing_compute_env (runtime/device/compute_env.hpp): one row per environment.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "runtime/device/compute_env.hpp"

namespace atl {
namespace {

struct row {
  const char* name;
  std::map<std::string, std::string> env;
  env_settings expected;
};

TEST(ComputeEnv, AddsOnlyWhatTheUserDidNotSetAndOnlyOnce) {
  const env_settings both = {{"GOMP_SPINCOUNT", "10000"}, {"OPENBLAS_THREAD_TIMEOUT", "4"}, {"ATOLL_COMPUTE_ENV", "1"}};
  const row rows[] = {
      {"empty environment", {}, both},
      {"after the re-execution", {{"ATOLL_COMPUTE_ENV", "1"}}, {}},
      {"user's spin count", {{"GOMP_SPINCOUNT", "0"}}, {{"OPENBLAS_THREAD_TIMEOUT", "4"}, {"ATOLL_COMPUTE_ENV", "1"}}},
      {"user's wait policy",
       {{"OMP_WAIT_POLICY", "ACTIVE"}},
       {{"OPENBLAS_THREAD_TIMEOUT", "4"}, {"ATOLL_COMPUTE_ENV", "1"}}},
      {"user's OpenBLAS timeout",
       {{"OPENBLAS_THREAD_TIMEOUT", "28"}},
       {{"GOMP_SPINCOUNT", "10000"}, {"ATOLL_COMPUTE_ENV", "1"}}},
      {"all set by the user", {{"OMP_WAIT_POLICY", "PASSIVE"}, {"OPENBLAS_THREAD_TIMEOUT", "10"}}, {}},
      {"an empty value counts as unset", {{"GOMP_SPINCOUNT", ""}, {"OPENBLAS_THREAD_TIMEOUT", ""}}, both},
  };
  for (const auto& r : rows) {
    const auto lookup = [&](const char* name) -> const char* {
      auto it = r.env.find(name);
      return it == r.env.end() ? nullptr : it->second.c_str();
    };
    EXPECT_EQ(missing_compute_env(lookup), r.expected) << r.name;
  }
}

}  // namespace
}  // namespace atl
