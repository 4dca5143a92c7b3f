#include "runtime/process/batch_job.hpp"

namespace atl {

std::string describe_batch_job(const std::function<const char*(const char*)>& getenv) {
  const auto get = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v ? v : "");
  };
  const auto job = get("SLURM_JOB_ID");
  if (job.empty()) return "";
  const auto array_job = get("SLURM_ARRAY_JOB_ID"), array_task = get("SLURM_ARRAY_TASK_ID");
  std::string text = "slurm " + (!array_job.empty() && !array_task.empty() ? array_job + "_" + array_task : job);
  const auto step = get("SLURM_STEP_ID");
  if (!step.empty()) text += "." + step;
  return text;
}

}  // namespace atl
