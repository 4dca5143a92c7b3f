#pragma once
// A replica seen in sync units, for sharded rounds (diloco.shards = S > 1; docs/design.md,
// "Sharded rounds"): each of the model's fragments is cut into S slices
// (runtime/algorithm/slices.hpp), and each slice is a fragment of its own to the worker and
// to everything past it: its own fragment_sync, coordinator, keepers, round log and digest.
// Unit u is slice u mod S of fragment u / S.
//
// The model underneath still syncs whole fragments, so this adapter splits and assembles:
//   - a contribution is encoded once for the whole fragment (its error feedback is the
//     whole fragment's) and each unit is handed its cut of those bytes;
//   - a unit's result is kept as it arrives; the merges of a fragment's units are applied
//     to the model together (one merge of the whole fragment, as without shards) the next
//     time the model is used. A unit that merges alone (the others resynced) leaves the
//     rest of the fragment's local values as they were;
//   - a unit that adopts a state (a joiner, a resync) changes its own range only.
// The worker keeps calling one unit at a time, in any order; none of this is its concern.
#include <cstddef>
#include <memory>
#include <vector>

#include "actors/worker/replica.hpp"
#include "runtime/algorithm/slices.hpp"
#include "runtime/core/expected.hpp"
#include "runtime/process/config.hpp"

namespace atl {

class sliced_replica final : public replica {
 public:
  // `base` cut into `shards` slices of each fragment, on `granule` values. invalid_config
  // when a fragment has fewer than `shards` granules (it could not give every unit values).
  static expected<std::unique_ptr<replica>> wrap(std::unique_ptr<replica> base, std::size_t shards,
                                                 std::size_t granule);

  std::size_t fragment_count() const override { return units_.size(); }
  std::size_t fragment_size(std::size_t unit) const override { return units_.at(unit).slice.count; }
  void read_fragment(std::size_t unit, float* values) const override;
  void write_fragment(std::size_t unit, const float* values) override;
  step_result train_step(std::int64_t step) override;
  std::optional<float> finish_queued_step() override;
  std::uint64_t data_units() const override { return base_->data_units(); }
  std::uint64_t units_per_step() const override { return base_->units_per_step(); }
  void queue_units(const std::vector<std::uint64_t>& units) override { base_->queue_units(units); }
  step_result compute_gradients(std::int64_t step) override;
  void read_gradients(std::size_t unit, float* values) const override;
  void write_gradients(std::size_t unit, const float* values) override;
  void apply_gradients(std::int64_t step) override;
  float evaluate() override;
  bool evaluates() const override { return base_->evaluates(); }
  std::size_t inner_state_size() const override { return base_->inner_state_size(); }
  std::int64_t read_inner_state(float* values) const override;
  void write_inner_state(const float* values, std::int64_t adam_step) override;

  void adopt_global(std::size_t unit, const float* theta_global) override;
  void merge_global(std::size_t unit, const float* theta_global, float alpha) override;
  status encode_pseudo_gradient(std::size_t unit, const encoding& how, encoded_values& out) override;
  float evaluate_global() override;

  // Unit u's place: its fragment and range.
  std::size_t fragment_of(std::size_t unit) const { return units_.at(unit).fragment; }
  const fragment_slice& slice_of(std::size_t unit) const { return units_.at(unit).slice; }

 private:
  struct unit_place {
    std::size_t fragment;
    std::size_t index;  // its slice of the fragment
    fragment_slice slice;
  };
  // One fragment's contribution of the current sync, encoded whole, with the units that
  // took their cut: a unit asking again starts the next sync.
  struct whole_encoding {
    bool valid = false;
    encoded_values bytes;
    std::vector<char> taken;
  };

  sliced_replica(std::unique_ptr<replica> base, std::size_t shards, std::vector<unit_place> units);
  std::size_t first_unit(std::size_t fragment) const { return fragment * shards_; }
  // Fragment f's theta_global, from its units' (a unit not adopted yet: `local`'s values).
  std::vector<float> assembled_global(std::size_t fragment, const std::vector<float>& local) const;
  // Unit u's theta_global into its range of global_, which is allocated once per fragment.
  void keep(std::size_t unit, const float* theta_global);
  bool all_kept(std::size_t fragment) const;
  std::vector<float> read_whole(std::size_t fragment) const;
  // Applies the merges collected for a fragment (every fragment): merging is deferred, but
  // what the model is asked always reflects it, so these are const in that sense.
  void apply_merges(std::size_t fragment) const;
  void apply_merges() const;
  void forget_encodings() {
    for (auto& e : encoded_) e.valid = false;
  }

  std::unique_ptr<replica> base_;
  std::size_t shards_;
  std::vector<unit_place> units_;
  // Per fragment, its theta_global as its units last kept it: each unit's range is its
  // own (kept_), and a usual round merges the whole buffer as it is (no copy made).
  std::vector<std::vector<float>> global_;
  std::vector<char> kept_;  // per unit: its range of global_ holds its theta_global
  mutable std::vector<char> merge_due_;  // per unit: its kept theta_global awaits merging
  mutable std::vector<float> merge_alpha_;  // per fragment: the alpha of its pending merges
  std::vector<whole_encoding> encoded_;  // per fragment
};

// The replica a worker of `run` syncs: `model` itself, or with diloco.shards > 1 `model`
// seen in sync units. Throws std::invalid_argument naming a fragment too small to cut.
std::unique_ptr<replica> in_sync_units(std::unique_ptr<replica> model, const run_config& run);

}  // namespace atl
