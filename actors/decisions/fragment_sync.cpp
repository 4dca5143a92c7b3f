#include "actors/decisions/fragment_sync.hpp"

#include <algorithm>

#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/core/digest.hpp"

namespace atl {

status fragment_sync::expect(phase wanted, const char* op) const {
  if (phase_ == wanted) return {};
  return make_error(errc::unexpected_message, std::string(op) + " in phase " + to_string(phase_));
}

void fragment_sync::ask() {
  if (phase_ == phase::fetching) fetch_.cancel();
  drop_provisional();  // a round reopened by a resend is released again
  phase_ = phase::asking;
}

bool fragment_sync::skip(std::uint64_t round, time_point now, duration again_after) {
  if (round <= skipped_ && now - skipped_at_ < again_after) return false;
  skipped_ = skips_round_ = round;
  skipped_at_ = now;
  return true;
}

void fragment_sync::drop_provisional() {
  recycle(std::move(provisional_));
  provisional_ = {};
  has_provisional_ = false;
}

void fragment_sync::recycle(std::vector<float> buffer) {
  if (buffer.capacity() > spare_.capacity()) spare_ = std::move(buffer);
}

std::vector<float> fragment_sync::recycled_buffer() {
  auto buffer = std::move(spare_);
  spare_ = {};
  return buffer;
}

void fragment_sync::start_fetch(state_fetch fetch, std::uint64_t epoch) {
  fetch_ = std::move(fetch);
  fetch_epoch_ = epoch;
  pending_ = {};
  drop_provisional();
  phase_ = phase::fetching;
}

void fragment_sync::adopt(std::uint64_t round, std::uint64_t epoch, std::vector<float> theta_global) {
  fetch_.cancel();  // a transfer of an older round, if any, is moot
  recycle(std::move(theta_global_));
  theta_global_ = std::move(theta_global);
  round_ = round;
  epoch_ = epoch;
  skips_round_ = 0;
  pending_ = {};
  result_ = {};
  drop_provisional();
  phase_ = phase::synced;
}

status fragment_sync::contribute(std::uint64_t round, std::int64_t merge_at, encoded_values bytes) {
  if (auto err = expect(phase::synced, "contribute")) return err;
  pending_ = std::move(bytes);
  pending_round_ = round;
  drop_provisional();
  merge_at_ = merge_at;
  phase_ = phase::awaiting_result;
  return {};
}

void fragment_sync::sent(std::uint64_t seq, time_point now) {
  pending_seq_ = seq;
  sent_at_ = now;  // a reopened round gets the whole result timeout
}

bool fragment_sync::result_arrived(std::uint64_t round, std::uint64_t epoch, std::vector<float> values) {
  return arrived(round, epoch, std::move(values), std::nullopt);
}

bool fragment_sync::arrived(std::uint64_t round, std::uint64_t epoch, std::vector<float> values,
                            std::optional<std::uint64_t> checked_digest) {
  if (phase_ != phase::awaiting_result || round != pending_round_) return false;  // duplicate or stale
  result_ = std::move(values);
  result_round_ = round;
  result_digest_ = checked_digest;
  epoch_ = epoch;
  phase_ = phase::result_ready;
  return true;
}

expected<bool> fragment_sync::update_arrived(std::uint64_t round, std::uint64_t epoch, const encoded_values& change,
                                             std::uint64_t digest) {
  if (phase_ != phase::awaiting_result || round != pending_round_) return false;  // duplicate or stale
  auto values = applied(round, change, digest);
  if (!values) return values.err();
  return arrived(round, epoch, std::move(*values), digest);
}

bool fragment_sync::provisional_arrived(std::uint64_t round, std::vector<float> values, std::uint64_t digest) {
  if (phase_ != phase::awaiting_result || round != pending_round_) return false;  // duplicate or stale
  provisional_ = std::move(values);
  provisional_round_ = round;
  provisional_digest_ = digest;
  has_provisional_ = true;
  provisional_checked_ = false;
  return true;
}

expected<bool> fragment_sync::provisional_update_arrived(std::uint64_t round, const encoded_values& change,
                                                         std::uint64_t digest) {
  if (phase_ != phase::awaiting_result || round != pending_round_) return false;  // duplicate or stale
  auto values = applied(round, change, digest);
  if (!values) return values.err();
  provisional_arrived(round, std::move(*values), digest);
  provisional_checked_ = true;
  return true;
}

expected<bool> fragment_sync::confirmed(std::uint64_t round, std::uint64_t epoch, std::uint64_t digest) {
  if (phase_ != phase::awaiting_result || round != pending_round_) return false;  // duplicate or stale
  if (!has_provisional_ || provisional_round_ != round || provisional_digest_ != digest)
    return make_error(errc::not_ready, "round " + std::to_string(round) + " committed, but its result is not here");
  auto values = std::move(provisional_);
  const auto checked = provisional_checked_ ? std::optional<std::uint64_t>(digest) : std::nullopt;
  drop_provisional();
  return arrived(round, epoch, std::move(values), checked);
}

expected<std::vector<float>> fragment_sync::applied(std::uint64_t round, const encoded_values& change,
                                                    std::uint64_t digest) {
  if (theta_global_.empty())
    return make_error(errc::not_ready, "no theta_global to apply round " + std::to_string(round) + " to");
  if (change.count != theta_global_.size())
    return make_error(errc::tensor_mismatch,
                      std::to_string(change.count) + " values, fragment has " + std::to_string(theta_global_.size()));
  if (auto err = check_encoded(change)) return err;
  auto values = recycled_buffer();
  values.resize(change.count);
  // Block by block, in one pass over memory: decode a block of the change, add it, test
  // the sum and hash it while it is in cache.
  constexpr std::size_t block = 16384;
  std::vector<float> decoded(std::min(block, values.size()));
  digest_stream hash;
  bool finite = true;
  for (std::size_t first = 0; first < values.size() && finite; first += block) {
    const std::size_t n = std::min(block, values.size() - first);
    decode_range(change, first, n, decoded.data());
    float* out = values.data() + first;
    const float* theta = theta_global_.data() + first;
    const float* add = decoded.data();
    for (std::size_t i = 0; i < n; ++i) out[i] = theta[i] + add[i];  // the coordinator's addition
    finite = all_finite(out, n);
    hash.update(out, n * sizeof(float));
  }
  status refused;
  if (!finite) refused = make_error(errc::not_finite, "round " + std::to_string(round) + " applied to theta_global");
  else if (hash.finish() != digest)
    refused = make_error(errc::digest_mismatch, "round " + std::to_string(round) +
                                                    " applied to theta_global of round " + std::to_string(round_));
  if (!refused) return values;
  recycle(std::move(values));
  return refused;
}

expected<const std::vector<float>*> fragment_sync::take_result() {
  if (auto err = expect(phase::result_ready, "take_result")) return err;
  round_ = result_round_;
  pending_ = {};
  drop_provisional();
  phase_ = phase::synced;
  recycle(std::move(theta_global_));
  theta_global_ = std::move(result_);
  result_ = {};
  return &theta_global_;
}

fragment_sync::on_state fragment_sync::state_arrived(std::uint64_t round, std::uint64_t epoch) {
  switch (phase_) {
    case phase::fetching:
      // The answer to a repeated request: that round is already on its way.
      return round == fetch_.round() ? on_state::ignore : on_state::adopt;
    case phase::asking:
      if (pending_.count > 0 && round + 1 == pending_round_) {
        epoch_ = epoch;
        phase_ = phase::awaiting_result;
        return on_state::send_again_and_resume;
      }
      return on_state::adopt;
    case phase::awaiting_result:
      if (round + 1 == pending_round_) {
        epoch_ = std::max(epoch_, epoch);
        drop_provisional();  // the round is done again, maybe with other contributions
        return on_state::send_again;
      }
      // It committed our round before it died, without releasing it.
      if (round >= pending_round_) return on_state::resync;
      break;
    case phase::synced:
    case phase::result_ready: break;
  }
  if (round == round_) epoch_ = std::max(epoch_, epoch);
  return on_state::ignore;
}

fragment_sync::on_refusal fragment_sync::refused(errc code, std::uint64_t refused_seq, std::uint64_t refusal_epoch) {
  if (phase_ != phase::awaiting_result || refused_seq != pending_seq_) return on_refusal::ignore;  // an old one
  if (code == errc::duplicate) return on_refusal::ignore;  // a resend it already has: keep waiting
  if (code == errc::stale_epoch && refusal_epoch > epoch_) {
    epoch_ = refusal_epoch;  // the round opened in a newer epoch than we knew
    return on_refusal::send_again;
  }
  return on_refusal::ask_state;
}

fragment_sync::retry fragment_sync::on_tick(time_point now, duration keeper_timeout, duration result_timeout) const {
  switch (phase_) {
    case phase::fetching: return now - chunk_asked_at_ >= keeper_timeout ? retry::next_keeper : retry::none;
    case phase::asking: return retry::ask_state;  // a coordinator may not be placed yet when we first ask
    case phase::awaiting_result: return now - sent_at_ > result_timeout ? retry::send_again : retry::none;
    case phase::synced:
    case phase::result_ready: return retry::none;
  }
  return retry::none;
}

fragment_sync::retry fragment_sync::on_link_restored() const {
  switch (phase_) {
    case phase::fetching: return retry::next_chunk;
    case phase::asking: return retry::ask_state;
    case phase::awaiting_result: return retry::send_again;
    case phase::synced:
    case phase::result_ready: return retry::none;
  }
  return retry::none;
}

const char* to_string(fragment_sync::phase p) {
  switch (p) {
    case fragment_sync::phase::asking: return "asking";
    case fragment_sync::phase::fetching: return "fetching";
    case fragment_sync::phase::synced: return "synced";
    case fragment_sync::phase::awaiting_result: return "awaiting_result";
    case fragment_sync::phase::result_ready: return "result_ready";
  }
  return "unknown";
}

}  // namespace atl
