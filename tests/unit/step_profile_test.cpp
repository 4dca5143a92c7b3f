// ATOLL_TORCH_PROFILE's window (training/step_profile.hpp): the spec's parse, and a trace
// of exactly the window's steps written by a replica's profiler.
#include "training/step_profile.hpp"

#include <cstdio>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

namespace atl {
namespace {

constexpr const char* without_kineto_reason =
    "this LibTorch was built without Kineto (Debian's CPU LibTorch) and cannot save a trace; the gpu tier "
    "checks traces (TorchReplica.AProfiledWindowTracesTheStepsKernels)";

// Whether `profiler` failed only because its LibTorch cannot save traces.
bool without_kineto(const step_profiler& profiler) {
  return profiler.failure().message.find("USE_KINETO") != std::string::npos;
}
bool without_kineto(step_profiler&& probe) {  // a one-step window, run to find out
  probe.before_step(0);
  probe.after_step(0);
  return without_kineto(probe);
}

TEST(StepProfile, TheSpecIsFirstCountAndFileOrAClearRefusal) {
  struct row {
    const char* spec;
    bool ok;
    std::int64_t first, count;
    const char* path;
  };
  const row rows[] = {
      {"40:20:trace.json", true, 40, 20, "trace.json"},
      {"0:1:/tmp/a:b.json", true, 0, 1, "/tmp/a:b.json"},  // FILE may hold ':'
      {"40:20", false, 0, 0, ""},
      {"40:0:t.json", false, 0, 0, ""},
      {"-1:5:t.json", false, 0, 0, ""},
      {"x:5:t.json", false, 0, 0, ""},
      {"4 :5:t.json", false, 0, 0, ""},
      {"40:20:", false, 0, 0, ""},
      {"99999999999999:1:t.json", false, 0, 0, ""},  // past 12 digits
  };
  for (const auto& r : rows) {
    const auto got = parse_step_profile(r.spec);
    ASSERT_EQ(static_cast<bool>(got), r.ok) << r.spec;
    if (!r.ok) {
      EXPECT_EQ(got.err().code, errc::invalid_config) << r.spec;
      EXPECT_NE(got.err().message.find("FIRST:COUNT:FILE"), std::string::npos) << got.err().message;
      continue;
    }
    ASSERT_TRUE(*got) << r.spec;
    EXPECT_EQ((*got)->first, r.first);
    EXPECT_EQ((*got)->count, r.count);
    EXPECT_EQ((*got)->path, r.path);
  }
  EXPECT_FALSE(*parse_step_profile(nullptr)) << "unset: no window";
  EXPECT_FALSE(*parse_step_profile("")) << "empty: no window";
}

// `steps` steps of one small matrix product each, inside the profiler's calls.
void run_steps(step_profiler& profiler, std::int64_t steps) {
  for (std::int64_t step = 0; step < steps; ++step) {
    profiler.before_step(step);
    torch::mm(torch::ones({8, 8}), torch::ones({8, 8}));
    profiler.after_step(step);
  }
}

TEST(StepProfile, WritesAChromeTraceOfTheWindowsOps) {
  const std::string path = testing::TempDir() + "step_profile_trace.json";
  std::remove(path.c_str());
  {
    step_profiler profiler(step_profile_window{2, 2, path}, torch::Device("cpu"));
    run_steps(profiler, 6);
    if (without_kineto(profiler)) GTEST_SKIP() << without_kineto_reason;
    EXPECT_FALSE(profiler.failure()) << profiler.failure().message;
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no trace at " << path;
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(trace.find("aten::mm"), std::string::npos);
  EXPECT_NE(trace.find("traceEvents"), std::string::npos);
}

TEST(StepProfile, ARunThatEndsInsideTheWindowStillWritesWhatItTraced) {
  const std::string path = testing::TempDir() + "step_profile_cut.json";
  std::remove(path.c_str());
  {
    step_profiler profiler(step_profile_window{1, 100, path}, torch::Device("cpu"));
    run_steps(profiler, 3);
  }  // the profiler's end writes what it traced
  std::ifstream in(path);
  if (!in && without_kineto(step_profiler(step_profile_window{0, 1, path}, torch::Device("cpu"))))
    GTEST_SKIP() << without_kineto_reason;
  EXPECT_TRUE(in) << "no trace at " << path;
}

}  // namespace
}  // namespace atl
