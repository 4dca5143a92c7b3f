#pragma once
// The replica of a worker whose training loop is the user's own (the Python API,
// atoll.DiLoCo): its parameters are the user's tensors, in place, and its inner step is
// the user's, handed over through step_turns (training/step_turns.hpp). The runtime does
// the rest as for any replica: fragments, theta_global, pseudo-gradients, codecs, error
// feedback, merges. DiLoCo and Streaming DiLoCo only (run.mode = ddp is refused by the
// config). Include only from LibTorch code.
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "actors/worker/replica.hpp"
#include "training/step_turns.hpp"

namespace atl {

// The groups whose tensors the worker wrote (a merge, theta_global at the start or the
// end) since the user's side last took them: the leader of a process group that trains
// one replica sends just those to the group's other processes.
class written_groups {
 public:
  void mark(const std::vector<std::size_t>& groups) {
    std::lock_guard lock(mu_);
    written_.insert(groups.begin(), groups.end());
  }
  std::vector<std::size_t> take() {
    std::lock_guard lock(mu_);
    std::vector<std::size_t> out(written_.begin(), written_.end());
    written_.clear();
    return out;
  }

 private:
  std::mutex mu_;
  std::set<std::size_t> written_;
};

// What the user's process shares with its worker: the parameters in groups (top-level
// children of the module in order; fragments are made of whole groups), their names in
// the same order, the turns of the loop, and which groups the worker wrote. The tensors
// must be fp32 and contiguous.
struct external_model {
  std::vector<std::vector<torch::Tensor>> groups;
  std::vector<std::vector<std::string>> names;
  step_turns turns;
  written_groups written;
  // atoll.ElasticSampler: the dataset's length and the indices a step trains; 0: the
  // user's loop samples its own data.
  std::uint64_t data_units = 0, batch_units = 0;
};

// The model's signature, for the head to check against the run's (runtime/core/model_signature.hpp).
std::string signature_of(const external_model& model);
// Refuses (invalid_config) parameters a worker cannot sync in place: not fp32, not
// contiguous, no groups, or names that do not match the groups.
status check_external_model(const external_model& model);

replica_factory external_replica_factory(std::shared_ptr<external_model> model);

}  // namespace atl
