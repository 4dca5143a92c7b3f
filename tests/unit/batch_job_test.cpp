#include "runtime/process/batch_job.hpp"

#include <map>

#include <gtest/gtest.h>

namespace atl {
namespace {

TEST(BatchJob, NamesTheSlurmJobStepAndArrayTaskFromTheEnvironment) {
  struct row {
    std::map<std::string, std::string> env;
    const char* want;
  };
  const row rows[] = {
      {{}, ""},
      {{{"SLURM_STEP_ID", "0"}}, ""},  // no job: not in Slurm
      {{{"SLURM_JOB_ID", "1234"}}, "slurm 1234"},
      {{{"SLURM_JOB_ID", "1234"}, {"SLURM_STEP_ID", "0"}}, "slurm 1234.0"},
      {{{"SLURM_JOB_ID", "1235"}, {"SLURM_ARRAY_JOB_ID", "1230"}, {"SLURM_ARRAY_TASK_ID", "4"}}, "slurm 1230_4"},
      {{{"SLURM_JOB_ID", "1235"}, {"SLURM_ARRAY_JOB_ID", "1230"}}, "slurm 1235"},  // half an array id
      {{{"SLURM_JOB_ID", "1235"}, {"SLURM_ARRAY_JOB_ID", "1230"}, {"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_STEP_ID", "2"}},
       "slurm 1230_4.2"},
  };
  for (const auto& r : rows) {
    const auto got = describe_batch_job([&](const char* name) -> const char* {
      const auto it = r.env.find(name);
      return it == r.env.end() ? nullptr : it->second.c_str();
    });
    EXPECT_EQ(got, r.want);
  }
}

}  // namespace
}  // namespace atl
