#pragma once
// What a worker trains: a model replica with its inner optimizer and data shard, seen
// through fp32 fragments. This header is free of LibTorch on purpose: the actors compile
// without it, and tests can train a fake replica. training/torch_replica.cpp implements it.
//
// The outer-sync side (adopt_global, merge_global, encode_pseudo_gradient,
// evaluate_global) has host implementations here, over read_fragment/write_fragment: the
// replica keeps theta_global and the error-feedback residual of each fragment in host
// memory. A replica whose parameters live on a GPU overrides them to keep both on the
// device, so that only encoded bytes cross PCIe.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/process/config.hpp"

namespace atl {

class replica {
 public:
  struct step_result {
    float loss;
    std::int64_t tokens;  // tokens (or samples) consumed by the step
    // A held-out loss that came with the step (a user's own loop evaluates itself); the
    // worker reports it as it reports its own evaluations.
    std::optional<float> held_out = std::nullopt;
  };

  virtual ~replica() = default;
  virtual std::size_t fragment_count() const = 0;
  virtual std::size_t fragment_size(std::size_t fragment) const = 0;  // fp32 values
  // Copies theta_local of a fragment out / in. `values` holds fragment_size() floats.
  virtual void read_fragment(std::size_t fragment, float* values) const = 0;
  virtual void write_fragment(std::size_t fragment, const float* values) = 0;
  // One inner step (forward, backward, clipped AdamW) at inner step index `step`. The loss
  // is the newest one known: a replica on an asynchronous device (CUDA) returns with its
  // step still queued and gives the loss of the step before (the first step's own), so
  // that the host's work between steps overlaps the device's. Everything else a replica
  // does is ordered after the queued step.
  virtual step_result train_step(std::int64_t step) = 0;
  // Waits for a step still queued and returns its loss; nullopt if the replica queues none.
  virtual std::optional<float> finish_queued_step() { return std::nullopt; }
  // The run's data cursor (docs/design.md, "Every sample once"): the units the replica's
  // training data has (0: it samples its own and leases nothing), how many one train_step
  // takes, and the units its next steps train, in order.
  virtual std::uint64_t data_units() const { return 0; }
  virtual std::uint64_t units_per_step() const { return 0; }
  virtual void queue_units(const std::vector<std::uint64_t>& units) { (void)units; }
  // The same step in two halves, for data-parallel training: gradients of one batch,
  // read out and replaced (by the average over workers), then the clipped AdamW step.
  virtual step_result compute_gradients(std::int64_t step) = 0;
  virtual void read_gradients(std::size_t fragment, float* values) const = 0;
  virtual void write_gradients(std::size_t fragment, const float* values) = 0;
  virtual void apply_gradients(std::int64_t step) = 0;
  // Mean held-out loss of the current parameters.
  virtual float evaluate() = 0;
  // False for a replica with no held-out data of its own (a user's own loop): the worker
  // then reports no held-out loss.
  virtual bool evaluates() const { return true; }

  // The inner optimizer's state (AdamW's first and second moments, fp32, in a layout of the
  // replica's choosing that replicas of one model share) and its step count, for a worker
  // that joins warm (actors/decisions/warm_start.hpp). Size 0: the replica cannot share it (a user's
  // own loop), and a joiner starts with fresh state. Ordered after a queued step.
  virtual std::size_t inner_state_size() const { return 0; }
  // Copies the state into `values` (inner_state_size() floats); returns AdamW's step count.
  virtual std::int64_t read_inner_state(float* values) const {
    (void)values;
    return 0;
  }
  virtual void write_inner_state(const float* values, std::int64_t adam_step) {
    (void)values;
    (void)adam_step;
  }

  // theta_global of fragment f (fragment_size(f) fp32 values) is the committed state:
  // adopt makes it the local fragment too (a joiner, a resync); merge blends it in,
  // local = alpha * local + (1 - alpha) * global (alpha = 0 is plain DiLoCo).
  virtual void adopt_global(std::size_t f, const float* theta_global);
  virtual void merge_global(std::size_t f, const float* theta_global, float alpha);
  // The pseudo-gradient global - local of fragment f, encoded; with error feedback the
  // residual of the last encoding, times feedback_decay, is added and the new one kept
  // (error_feedback in runtime/algorithm/codec.hpp). Typed errors: not_finite (the
  // replica diverged), invalid_config (a bad chunk).
  struct encoding {
    codec_kind codec = codec_kind::fp32;
    std::size_t chunk = 0;
    bool error_feedback = false;
    float feedback_decay = 1.0f;  // SparseLoCo's beta (diloco.outer = sparseloco); 1: plain error feedback
  };
  virtual status encode_pseudo_gradient(std::size_t f, const encoding& how, encoded_values& out);
  // Held-out loss of theta_global (every fragment's global swapped in, then swapped back).
  virtual float evaluate_global();
  // Makes theta_global the local parameters of every fragment that has one: the model a
  // run ends with, the same on every worker (Streaming DiLoCo's fragments last synced at
  // different steps, and alpha > 0 keeps part of the local state).
  void adopt_every_global();

 private:
  struct host_sync;  // theta_global and residuals of the host implementations
  std::shared_ptr<host_sync> host_;
  host_sync& host();
};

struct replica_spec {
  std::uint32_t rank = 0;  // this worker's data shard
  std::uint32_t world_size = 1;  // number of shards
  std::string device = "cpu";
  bool with_data = true;  // false: the model only (`atoll export`), no data file is read
  std::string model_file;  // this process's copy of model.file (a TorchScript run); set by the factory
};

using replica_factory = std::function<std::unique_ptr<replica>(const run_config&, const replica_spec&)>;

}  // namespace atl
