#include "actors/worker/sliced_replica.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "actors/shared/slicing.hpp"

namespace atl {

expected<std::unique_ptr<replica>> sliced_replica::wrap(std::unique_ptr<replica> base, std::size_t shards,
                                                        std::size_t granule) {
  std::vector<unit_place> units;
  for (std::size_t f = 0; f < base->fragment_count(); ++f) {
    const auto slices = plan_slices(base->fragment_size(f), granule, shards);
    if (slices.size() != shards)
      return make_error(errc::invalid_config, "diloco.shards = " + std::to_string(shards) + ": fragment " +
                                                  std::to_string(f) + " has " + std::to_string(base->fragment_size(f)) +
                                                  " values, fewer than " + std::to_string(shards) + " slices of " +
                                                  std::to_string(granule) + " (use fewer shards or fewer fragments)");
    for (std::size_t s = 0; s < slices.size(); ++s) units.push_back({f, s, slices[s]});
  }
  return std::unique_ptr<replica>(new sliced_replica(std::move(base), shards, std::move(units)));
}

sliced_replica::sliced_replica(std::unique_ptr<replica> base, std::size_t shards, std::vector<unit_place> units)
    : base_(std::move(base)),
      shards_(shards),
      units_(std::move(units)),
      global_(base_->fragment_count()),
      kept_(units_.size(), 0),
      merge_due_(units_.size(), 0),
      merge_alpha_(base_->fragment_count(), 0.0f),
      encoded_(base_->fragment_count()) {}

std::vector<float> sliced_replica::read_whole(std::size_t fragment) const {
  std::vector<float> values(base_->fragment_size(fragment));
  base_->read_fragment(fragment, values.data());
  return values;
}

std::vector<float> sliced_replica::assembled_global(std::size_t fragment, const std::vector<float>& local) const {
  std::vector<float> global = local;
  for (std::size_t u = first_unit(fragment); u < first_unit(fragment) + shards_; ++u) {
    if (!kept_[u]) continue;
    const auto first = global_[fragment].begin() + static_cast<std::ptrdiff_t>(units_[u].slice.first);
    std::copy(first, first + static_cast<std::ptrdiff_t>(units_[u].slice.count),
              global.begin() + static_cast<std::ptrdiff_t>(units_[u].slice.first));
  }
  return global;
}

void sliced_replica::keep(std::size_t unit, const float* theta_global) {
  const auto& place = units_.at(unit);
  auto& global = global_[place.fragment];
  if (global.empty()) global.resize(base_->fragment_size(place.fragment));
  std::copy_n(theta_global, place.slice.count, global.begin() + static_cast<std::ptrdiff_t>(place.slice.first));
  kept_[unit] = 1;
}

bool sliced_replica::all_kept(std::size_t fragment) const {
  const auto first = kept_.begin() + static_cast<std::ptrdiff_t>(first_unit(fragment));
  return std::all_of(first, first + static_cast<std::ptrdiff_t>(shards_), [](char k) { return k != 0; });
}

void sliced_replica::apply_merges(std::size_t fragment) const {
  const auto first = merge_due_.begin() + static_cast<std::ptrdiff_t>(first_unit(fragment));
  const auto due = static_cast<std::size_t>(std::count(first, first + static_cast<std::ptrdiff_t>(shards_), 1));
  if (due == 0) return;
  if (due == shards_) {  // the usual round: one merge of the whole fragment, as without shards (all kept)
    base_->merge_global(fragment, global_[fragment].data(), merge_alpha_[fragment]);
  } else {
    const auto before = read_whole(fragment);
    base_->merge_global(fragment, assembled_global(fragment, before).data(), merge_alpha_[fragment]);
    // Only the units due merge: the others keep their local values (merge_global blended
    // the whole fragment towards theta_global).
    auto after = read_whole(fragment);
    for (std::size_t u = first_unit(fragment); u < first_unit(fragment) + shards_; ++u) {
      if (merge_due_[u]) continue;
      const auto& s = units_[u].slice;
      std::copy(before.begin() + static_cast<std::ptrdiff_t>(s.first),
                before.begin() + static_cast<std::ptrdiff_t>(s.first + s.count),
                after.begin() + static_cast<std::ptrdiff_t>(s.first));
    }
    base_->write_fragment(fragment, after.data());
  }
  std::fill(first, first + static_cast<std::ptrdiff_t>(shards_), 0);
}

void sliced_replica::apply_merges() const {
  for (std::size_t f = 0; f < base_->fragment_count(); ++f) apply_merges(f);
}

void sliced_replica::read_fragment(std::size_t unit, float* values) const {
  const auto& place = units_.at(unit);
  apply_merges(place.fragment);
  const auto whole = read_whole(place.fragment);
  std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(place.slice.first), place.slice.count, values);
}

void sliced_replica::write_fragment(std::size_t unit, const float* values) {
  const auto& place = units_.at(unit);
  apply_merges(place.fragment);
  auto whole = read_whole(place.fragment);
  std::copy_n(values, place.slice.count, whole.begin() + static_cast<std::ptrdiff_t>(place.slice.first));
  base_->write_fragment(place.fragment, whole.data());
  encoded_[place.fragment].valid = false;
}

replica::step_result sliced_replica::train_step(std::int64_t step) {
  apply_merges();
  forget_encodings();
  return base_->train_step(step);
}

std::optional<float> sliced_replica::finish_queued_step() { return base_->finish_queued_step(); }

replica::step_result sliced_replica::compute_gradients(std::int64_t step) {
  apply_merges();
  return base_->compute_gradients(step);
}

void sliced_replica::read_gradients(std::size_t unit, float* values) const {
  const auto& place = units_.at(unit);
  std::vector<float> whole(base_->fragment_size(place.fragment));
  base_->read_gradients(place.fragment, whole.data());
  std::copy_n(whole.begin() + static_cast<std::ptrdiff_t>(place.slice.first), place.slice.count, values);
}

void sliced_replica::write_gradients(std::size_t unit, const float* values) {
  const auto& place = units_.at(unit);
  std::vector<float> whole(base_->fragment_size(place.fragment));
  base_->read_gradients(place.fragment, whole.data());
  std::copy_n(values, place.slice.count, whole.begin() + static_cast<std::ptrdiff_t>(place.slice.first));
  base_->write_gradients(place.fragment, whole.data());
}

void sliced_replica::apply_gradients(std::int64_t step) {
  forget_encodings();
  base_->apply_gradients(step);
}

float sliced_replica::evaluate() {
  apply_merges();
  return base_->evaluate();
}

std::int64_t sliced_replica::read_inner_state(float* values) const { return base_->read_inner_state(values); }

void sliced_replica::write_inner_state(const float* values, std::int64_t adam_step) {
  base_->write_inner_state(values, adam_step);
}

void sliced_replica::adopt_global(std::size_t unit, const float* theta_global) {
  const auto& place = units_.at(unit);
  apply_merges(place.fragment);
  keep(unit, theta_global);
  // The model's theta_global of the whole fragment, then its local values: this unit's
  // range takes the state, the others stay as they were.
  auto local = read_whole(place.fragment);
  if (all_kept(place.fragment)) base_->adopt_global(place.fragment, global_[place.fragment].data());
  else base_->adopt_global(place.fragment, assembled_global(place.fragment, local).data());
  std::copy_n(theta_global, place.slice.count, local.begin() + static_cast<std::ptrdiff_t>(place.slice.first));
  base_->write_fragment(place.fragment, local.data());
  encoded_[place.fragment].valid = false;
}

void sliced_replica::merge_global(std::size_t unit, const float* theta_global, float alpha) {
  const auto& place = units_.at(unit);
  keep(unit, theta_global);
  merge_due_[unit] = 1;
  merge_alpha_[place.fragment] = alpha;
  encoded_[place.fragment].valid = false;
}

status sliced_replica::encode_pseudo_gradient(std::size_t unit, const encoding& how, encoded_values& out) {
  const auto& place = units_.at(unit);
  apply_merges(place.fragment);
  auto& whole = encoded_[place.fragment];
  if (!whole.valid || whole.taken[place.index]) {  // the first unit of this sync: encode it all once
    whole.valid = false;
    if (auto err = base_->encode_pseudo_gradient(place.fragment, how, whole.bytes)) return err;
    whole.valid = true;
    whole.taken.assign(shards_, 0);
  }
  auto cut = cut_encoded(whole.bytes, place.slice);
  if (!cut) return cut.err();
  out = std::move(*cut);
  whole.taken[place.index] = 1;
  if (std::all_of(whole.taken.begin(), whole.taken.end(), [](char t) { return t != 0; })) whole.valid = false;
  return {};
}

float sliced_replica::evaluate_global() {
  apply_merges();
  return base_->evaluate_global();
}

std::unique_ptr<replica> in_sync_units(std::unique_ptr<replica> model, const run_config& run) {
  if (shards_of(run) <= 1) return model;
  auto sliced = sliced_replica::wrap(std::move(model), static_cast<std::size_t>(shards_of(run)), slice_granule_of(run));
  if (!sliced) throw std::invalid_argument(sliced.err().describe());
  return std::move(*sliced);
}

}  // namespace atl
