#include "training/lm_batches.hpp"

#include <stdexcept>

namespace atl {
namespace {

// Task code fails by throwing (training/task.hpp): a data file that cannot be read, at
// open or later, becomes a task_error with its typed error.
template <class T>
T value_or_throw(expected<T> v) {
  if (!v) throw task_error(v.err());
  return std::move(*v);
}

}  // namespace

lm_batches::lm_batches(const token_windows_spec& spec, std::uint64_t seed)
    : windows_(value_or_throw(token_windows::open(spec))), rng_(seed * 1000003u + spec.rank) {
  for (std::uint64_t b = 0; b < spec.eval_batches; ++b)
    eval_.push_back(to_batch(value_or_throw(windows_.held_out_batch(b))));
}

batch lm_batches::next_train_batch() {
  if (!from_cursor_) return to_batch(value_or_throw(windows_.sample_train(rng_)));
  const auto rows = windows_.spec().batch;
  if (queued_.size() < rows)
    throw task_error(make_error(errc::not_ready, "the data cursor's units ran out: " + std::to_string(queued_.size()) +
                                                     " queued, a batch takes " + std::to_string(rows)));
  std::vector<std::uint64_t> units(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(rows));
  queued_.erase(queued_.begin(), queued_.begin() + static_cast<std::ptrdiff_t>(rows));
  return to_batch(value_or_throw(windows_.train_windows(units)));
}

void lm_batches::queue_units(const std::vector<std::uint64_t>& units) {
  from_cursor_ = true;
  queued_.insert(queued_.end(), units.begin(), units.end());
}

std::int64_t lm_batches::tokens_per_batch() const {
  return static_cast<std::int64_t>(windows_.spec().batch * windows_.spec().context);
}

batch lm_batches::to_batch(std::vector<std::int64_t> windows) const {
  const auto rows = static_cast<std::int64_t>(windows_.spec().batch);
  const auto width = static_cast<std::int64_t>(windows_.spec().context + 1);
  auto w = torch::from_blob(windows.data(), {rows, width}, torch::kLong).clone();
  return {w.slice(1, 0, width - 1), w.slice(1, 1, width)};
}

}  // namespace atl
