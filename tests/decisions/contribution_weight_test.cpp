// How much a contribution counts (actors/decisions/contribution_weight.hpp), one row per case.
#include <gtest/gtest.h>

#include <vector>

#include "actors/decisions/contribution_weight.hpp"

namespace atl {
namespace {

TEST(ContributionWeight, SamplesSinceTheLastSyncOrOnePerStepThatReportedNone) {
  struct row {
    const char* name;
    bool by_samples;
    std::vector<std::int64_t> steps;  // the samples each step reported
    float expected;
  };
  const row rows[] = {
      {"25 steps of 512 samples", true, std::vector<std::int64_t>(25, 512), 12800.0f},
      {"a slower worker: 10 steps of the same batch", true, std::vector<std::int64_t>(10, 512), 5120.0f},
      {"larger batches count for more", true, {1024, 1024}, 2048.0f},
      {"steps that report no samples count one each", true, {0, 0, 0}, 3.0f},
      {"mixed: the samples, and one for the step without", true, {100, 0}, 101.0f},
      {"nothing trained since the last sync still counts as one", true, {}, 1.0f},
      {"uniform: one whatever was trained", false, std::vector<std::int64_t>(25, 512), 1.0f},
  };
  for (const auto& r : rows) {
    trained_since_sync trained;
    for (const auto s : r.steps) trained.step(s);
    EXPECT_EQ(contribution_weight(r.by_samples, trained), r.expected) << r.name;
  }
}

}  // namespace
}  // namespace atl
