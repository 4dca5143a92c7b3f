#pragma once
// The batch job a process runs in, read from the scheduler's environment at start, so that
// `atollctl members` can name the job a node belongs to (the handle a Slurm user has:
// scancel, scontrol, sacct). Pure: the environment is passed in.
#include <functional>
#include <string>

namespace atl {

// "slurm 1234.0" (SLURM_JOB_ID, then .SLURM_STEP_ID when the process is a job step; an array
// task is "slurm 1230_4", its array job and task); empty outside a batch job.
std::string describe_batch_job(const std::function<const char*(const char*)>& getenv);

}  // namespace atl
