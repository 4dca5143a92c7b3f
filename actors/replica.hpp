#pragma once
// What a worker trains: a model replica with its inner optimizer and data shard, seen
// through fp32 fragments. This header is free of LibTorch on purpose: the actors compile
// without it, and tests can train a fake replica. examples/torch_replica implements it.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "runtime/config.hpp"

namespace atl {

class replica {
 public:
  struct step_result {
    float loss;
    std::int64_t tokens;  // tokens (or samples) consumed by the step
  };

  virtual ~replica() = default;
  virtual std::size_t fragment_count() const = 0;
  virtual std::size_t fragment_size(std::size_t fragment) const = 0;  // fp32 values
  // Copies theta_local of a fragment out / in. `values` holds fragment_size() floats.
  virtual void read_fragment(std::size_t fragment, float* values) const = 0;
  virtual void write_fragment(std::size_t fragment, const float* values) = 0;
  // One inner step (forward, backward, clipped AdamW) at inner step index `step`.
  virtual step_result train_step(std::int64_t step) = 0;
  // The same step in two halves, for data-parallel training: gradients of one batch,
  // read out and replaced (by the average over workers), then the clipped AdamW step.
  virtual step_result compute_gradients(std::int64_t step) = 0;
  virtual void read_gradients(std::size_t fragment, float* values) const = 0;
  virtual void write_gradients(std::size_t fragment, const float* values) = 0;
  virtual void apply_gradients(std::int64_t step) = 0;
  // Mean held-out loss of the current parameters.
  virtual float evaluate() = 0;
};

struct replica_spec {
  std::uint32_t rank = 0;        // this worker's data shard
  std::uint32_t world_size = 1;  // number of shards
  std::string device = "cpu";
};

using replica_factory = std::function<std::unique_ptr<replica>(const run_config&, const replica_spec&)>;

}  // namespace atl
