#include "training/step_turns.hpp"

namespace atl {

std::optional<step_turns::user_step> step_turns::wait_for_user_step() {
  std::unique_lock lock(mu_);
  ++asked_;
  changed_.notify_all();
  changed_.wait(lock, [&] { return given_ >= asked_ || closed_; });
  if (given_ < asked_) {  // closed before the user's step came
    --asked_;
    return std::nullopt;
  }
  return last_;
}

void step_turns::finish() {
  std::lock_guard lock(mu_);
  finished_ = true;
  changed_.notify_all();
}

step_turns::turn step_turns::wait_for_worker() {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return asked_ > given_ || finished_; });
  return asked_ > given_ ? turn::go : turn::done;
}

void step_turns::hand_over(user_step step) {
  std::lock_guard lock(mu_);
  last_ = step;
  ++given_;
  changed_.notify_all();
}

void step_turns::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  finished_ = true;
  changed_.notify_all();
}

void step_turns::offer_units(std::vector<std::uint64_t> units) {
  std::lock_guard lock(mu_);
  units_.push_back(std::move(units));
  changed_.notify_all();
}

step_turns::units_turn step_turns::take_units(std::vector<std::uint64_t>& out) {
  std::unique_lock lock(mu_);
  changed_.wait(lock, [&] { return !units_.empty() || finished_ || asked_ > given_; });
  if (!units_.empty()) {
    out = std::move(units_.front());
    units_.pop_front();
    return units_turn::ready;
  }
  return finished_ ? units_turn::done : units_turn::asked_ahead;
}

bool step_turns::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

std::int64_t step_turns::steps_handed_over() const {
  std::lock_guard lock(mu_);
  return given_;
}

}  // namespace atl
