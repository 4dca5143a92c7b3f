#pragma once
// The replica of a worker whose training loop is the user's own (the Python API,
// atoll.DiLoCo): its parameters are the user's tensors, in place, and its inner step is
// the user's, handed over through step_turns (examples/step_turns.hpp). The runtime does
// the rest as for any replica: fragments, theta_global, pseudo-gradients, codecs, error
// feedback, merges. DiLoCo and Streaming DiLoCo only (run.mode = ddp is refused by the
// config). Include only from LibTorch code.
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "actors/replica.hpp"
#include "examples/step_turns.hpp"

namespace atl {

// What the user's process shares with its worker: the parameters in groups (top-level
// children of the module in order; fragments are made of whole groups), their names in
// the same order, and the turns of the loop. The tensors must be fp32 and contiguous.
struct external_model {
  std::vector<std::vector<torch::Tensor>> groups;
  std::vector<std::vector<std::string>> names;
  step_turns turns;
};

// The model's signature, for the head to check against the run's (runtime/model_signature.hpp).
std::string signature_of(const external_model& model);
// Refuses (invalid_config) parameters a worker cannot sync in place: not fp32, not
// contiguous, no groups, or names that do not match the groups.
status check_external_model(const external_model& model);

replica_factory external_replica_factory(std::shared_ptr<external_model> model);

}  // namespace atl
