#include "actors/decisions/round_tracker.hpp"

#include <cmath>

namespace atl {

const char* to_string(round_tracker::phase p) {
  switch (p) {
    case round_tracker::phase::unseeded: return "unseeded";
    case round_tracker::phase::ready: return "ready";
    case round_tracker::phase::collecting: return "collecting";
    case round_tracker::phase::committing: return "committing";
  }
  return "unknown";
}

namespace {
error wrong_phase(const char* op, round_tracker::phase p) {
  return make_error(errc::unexpected_message, std::string(op) + " in phase " + to_string(p));
}
}  // namespace

status round_tracker::restore(std::uint64_t round, std::vector<float> theta, std::vector<float> momentum,
                              std::vector<float> residual) {
  if (phase_ != phase::unseeded) return wrong_phase("restore", phase_);
  if (theta.size() != momentum.size()) return make_error(errc::tensor_mismatch, "theta and momentum sizes differ");
  if (!residual.empty() && residual.size() != theta.size())
    return make_error(errc::tensor_mismatch, "theta and residual sizes differ");
  round_ = round;
  state_.theta = std::move(theta);
  state_.momentum = std::move(momentum);
  state_.residual = std::move(residual);
  phase_ = phase::ready;
  return {};
}

status round_tracker::seed(std::vector<float> theta) {
  if (phase_ != phase::unseeded) return wrong_phase("seed", phase_);
  if (!all_finite(theta.data(), theta.size())) return make_error(errc::not_finite, "initial parameters");
  round_ = 0;
  state_.momentum.assign(theta.size(), 0.0f);
  state_.residual.clear();
  state_.theta = std::move(theta);
  phase_ = phase::committing;
  return {};
}

status round_tracker::open(std::uint64_t epoch, std::vector<std::string> participants) {
  if (phase_ != phase::ready) return wrong_phase("open", phase_);
  if (participants.empty()) return make_error(errc::not_ready, "a round needs participants");
  epoch_ = epoch;
  participants_ = std::set<std::string>(participants.begin(), participants.end());
  recycle_contributions();
  phase_ = phase::collecting;
  return {};
}

status round_tracker::admissible(const std::string& worker, std::uint64_t epoch, std::uint64_t round) const {
  if (phase_ != phase::collecting) {
    // A resend of a contribution the committing round already counted (the sender's link
    // dropped): its result is coming.
    if (phase_ == phase::committing && round == round_ && contributions_.count(worker))
      return make_error(errc::duplicate, worker + " already contributed to round " + std::to_string(round));
    // The epoch fence holds between rounds too: a replay from a gone epoch is stale
    // whatever round it names.
    if (epoch < epoch_)
      return make_error(errc::stale_epoch,
                        "epoch " + std::to_string(epoch) + " < last round epoch " + std::to_string(epoch_));
    if (round <= round_) return make_error(errc::wrong_round, "round " + std::to_string(round) + " is closed");
    return wrong_phase("contribution", phase_);
  }
  if (epoch < epoch_)
    return make_error(errc::stale_epoch, "epoch " + std::to_string(epoch) + " < round epoch " + std::to_string(epoch_));
  if (epoch > epoch_)
    return make_error(errc::stale_epoch,
                      "epoch " + std::to_string(epoch) + " is ahead of round epoch " + std::to_string(epoch_));
  if (round != open_round())
    return make_error(errc::wrong_round,
                      "round " + std::to_string(round) + ", open round is " + std::to_string(open_round()));
  if (!participants_.count(worker))
    return make_error(errc::not_participant, worker + " is not in round " + std::to_string(round));
  if (contributions_.count(worker)) return make_error(errc::duplicate, worker + " already contributed");
  return {};
}

namespace {
// A weight the average cannot take is the contribution's refusal, not the round's failure.
status check_weight(const std::string& worker, float weight) {
  if (weight > 0.0f && std::isfinite(weight)) return {};
  return make_error(errc::not_finite, "weight " + std::to_string(weight) + " of " + worker + "'s contribution");
}
}  // namespace

expected<bool> round_tracker::add(const std::string& worker, std::uint64_t epoch, std::uint64_t round,
                                  std::vector<float> delta, float weight) {
  if (auto err = admissible(worker, epoch, round)) return err;
  return take_values(worker, std::move(delta), weight);
}

expected<bool> round_tracker::add_encoded(const std::string& worker, std::uint64_t epoch, std::uint64_t round,
                                          encoded_values delta, float weight) {
  if (auto err = admissible(worker, epoch, round)) return err;
  return take_encoded(worker, std::move(delta), weight);
}

namespace {
const std::string late_suffix = "#late";
}  // namespace

std::string round_tracker::late_name(const std::string& worker) { return worker + late_suffix; }

bool round_tracker::is_late_name(const std::string& name) {
  return name.size() > late_suffix.size() &&
         name.compare(name.size() - late_suffix.size(), late_suffix.size(), late_suffix) == 0;
}

std::string round_tracker::worker_of_late_name(const std::string& name) {
  return name.substr(0, name.size() - late_suffix.size());
}

status round_tracker::admissible_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round) const {
  if (phase_ != phase::collecting) return wrong_phase("late contribution", phase_);
  if (round != round_ || round == 0)
    return make_error(errc::wrong_round,
                      "late round " + std::to_string(round) + ", last committed is " + std::to_string(round_));
  if (!last_contributors_)
    return make_error(errc::wrong_round, "round " + std::to_string(round) +
                                             " is closed (who was left out of it is "
                                             "not known here)");
  if (last_contributors_->count(worker))
    return make_error(errc::wrong_round, worker + " contributed to round " + std::to_string(round) + ", now closed");
  if (epoch > epoch_)
    return make_error(errc::stale_epoch,
                      "epoch " + std::to_string(epoch) + " is ahead of round epoch " + std::to_string(epoch_));
  if (!participants_.count(worker))
    return make_error(errc::not_participant, worker + " is not in round " + std::to_string(open_round()));
  if (contributions_.count(late_name(worker)))
    return make_error(errc::duplicate, worker + "'s late work for round " + std::to_string(round) + " is held");
  return {};
}

expected<bool> round_tracker::add_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round,
                                       std::vector<float> delta, float weight) {
  return take_late(
      worker, epoch, round,
      [&](const std::string& name, float discounted) { return take_values(name, std::move(delta), discounted); },
      weight);
}

expected<bool> round_tracker::add_late_encoded(const std::string& worker, std::uint64_t epoch, std::uint64_t round,
                                               encoded_values delta, float weight) {
  return take_late(
      worker, epoch, round,
      [&](const std::string& name, float discounted) { return take_encoded(name, std::move(delta), discounted); },
      weight);
}

template <typename Take>
expected<bool> round_tracker::take_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round, Take take,
                                        float weight) {
  if (auto err = admissible_late(worker, epoch, round)) return err;
  ++late_inputs_;  // counted before it is stored: a late input never completes a round
  auto taken = take(late_name(worker), weight * late_discount);
  if (!taken) --late_inputs_;
  return taken;
}

expected<bool> round_tracker::take_values(const std::string& name, std::vector<float> delta, float weight) {
  if (auto err = check_weight(name, weight)) return err;
  if (delta.size() != state_.theta.size())
    return make_error(errc::tensor_mismatch,
                      std::to_string(delta.size()) + " values, fragment has " + std::to_string(state_.theta.size()));
  if (!all_finite(delta.data(), delta.size())) return make_error(errc::not_finite, "contribution of " + name);
  contribution c;
  c.values = std::move(delta);
  c.weight = weight;
  contributions_.emplace(name, std::move(c));
  return finish_if_complete();
}

expected<bool> round_tracker::take_encoded(const std::string& name, encoded_values delta, float weight) {
  if (auto err = check_weight(name, weight)) return err;
  if (!has_scales(delta.kind) || rule_ != update_rule::nesterov) {  // values that may not be finite, or no fused step
    auto values = contribution_buffer();
    values.resize(delta.count);
    if (auto err = decode(delta, values.data())) return err;
    return take_values(name, std::move(values), weight);
  }
  if (delta.count != state_.theta.size())
    return make_error(errc::tensor_mismatch,
                      std::to_string(delta.count) + " values, fragment has " + std::to_string(state_.theta.size()));
  if (auto err = check_encoded(delta)) return err;  // finite scales: every value is finite
  contribution c;
  c.encoded = std::move(delta);
  c.is_encoded = true;
  c.weight = weight;
  contributions_.emplace(name, std::move(c));
  return finish_if_complete();
}

expected<bool> round_tracker::drop(const std::string& worker) {
  if (phase_ != phase::collecting) return false;
  participants_.erase(worker);
  contributions_.erase(worker);
  if (participants_.empty()) {  // nobody left: the round is abandoned, state unchanged
    phase_ = phase::ready;
    return false;
  }
  return finish_if_complete();
}

expected<bool> round_tracker::close_at_deadline(std::size_t needed) {
  if (phase_ != phase::collecting || on_time_contributions() == 0 || on_time_contributions() < needed) return false;
  const auto contributed = contributors();
  participants_ = std::set<std::string>(contributed.begin(), contributed.end());
  return finish_if_complete();
}

expected<bool> round_tracker::finish_if_complete() {
  if (on_time_contributions() < participants_.size()) return false;
  std::vector<weighted_input> inputs;
  for (const auto& [_, c] : contributions_)  // sorted by worker id
    inputs.push_back(c.is_encoded ? weighted_input{nullptr, c.weight, &c.encoded}
                                  : weighted_input{c.values.data(), c.weight});
  if (rule_ == update_rule::nesterov) {
    if (auto st = apply_outer_round(outer_, inputs, state_, scratch_, update_)) return st;
  } else if (auto st = weighted_average(inputs, state_.theta.size(), average_)) {
    return st;
  }
  round_ += 1;
  phase_ = phase::committing;
  return true;
}

void round_tracker::encode_results(codec_kind kind, std::size_t chunk, bool state_follows_result) {
  outer_.result_codec = kind;
  outer_.result_chunk = chunk;
  outer_.state_follows_result = state_follows_result;
}

status round_tracker::committed() {
  if (phase_ != phase::committing) return wrong_phase("committed", phase_);
  phase_ = phase::ready;
  if (round_ > 0) {
    const auto contributed = contributors();
    last_contributors_.emplace(contributed.begin(), contributed.end());
  }
  recycle_contributions();
  return {};
}

void round_tracker::recycle_contributions() {
  for (auto& [_, c] : contributions_) {
    if (c.is_encoded) spare_encoded_.push_back(std::move(c.encoded.payload));
    else spare_contributions_.push_back(std::move(c.values));
  }
  contributions_.clear();
  late_inputs_ = 0;
}

std::vector<float> round_tracker::contribution_buffer() {
  if (spare_contributions_.empty()) return {};
  auto buffer = std::move(spare_contributions_.back());
  spare_contributions_.pop_back();
  return buffer;
}

encoded_values round_tracker::encoded_buffer() {
  encoded_values buffer;
  if (spare_encoded_.empty()) return buffer;
  buffer.payload = std::move(spare_encoded_.back());
  spare_encoded_.pop_back();
  return buffer;
}

std::vector<std::string> round_tracker::contributors() const {
  std::vector<std::string> out;
  for (const auto& [w, _] : contributions_)
    if (!is_late_name(w)) out.push_back(w);
  return out;
}

std::vector<std::pair<std::string, float>> round_tracker::inputs() const {
  std::vector<std::pair<std::string, float>> out;
  for (const auto& [name, c] : contributions_) out.emplace_back(name, c.weight);
  return out;
}

}  // namespace atl
