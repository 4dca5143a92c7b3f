#include "actors/decisions/state_fetch.hpp"

#include <algorithm>

#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"

namespace atl {

state_fetch::state_fetch(std::uint64_t round, std::uint64_t count, std::uint64_t digest,
                         std::vector<std::string> sources, std::uint64_t chunk)
    : active_(true),
      round_(round),
      digest_(digest),
      chunk_(std::max<std::uint64_t>(1, chunk)),
      sources_(std::move(sources)),
      values_(count) {
  if (sources_.empty()) sources_.push_back(keeper_id(head_keeper_number));
}

state_fetch::request state_fetch::next_request() const {
  return {sources_[source_], next_, std::min<std::uint64_t>(chunk_, values_.size() - next_)};
}

state_fetch::outcome state_fetch::on_reply(const std::string& sender, std::uint64_t round, std::uint64_t offset,
                                           bool found, const std::vector<float>& values) {
  if (!active_ || sender != sources_[source_] || round != round_ || offset != next_) return outcome::ignored;
  if (!found || values.empty() || values.size() > values_.size() - next_) return outcome::failed;
  std::copy(values.begin(), values.end(), values_.begin() + static_cast<std::ptrdiff_t>(next_));
  next_ += values.size();
  failures_ = 0;
  if (next_ < values_.size()) return outcome::more;
  if (digest64(values_.data(), values_.size() * sizeof(float)) != digest_) {
    next_ = 0;  // some source sent wrong bytes: start over from the next one
    return outcome::failed;
  }
  active_ = false;
  return outcome::done;
}

bool state_fetch::next_source() {
  if (++failures_ > 3 * static_cast<int>(sources_.size())) {
    active_ = false;
    return false;
  }
  source_ = (source_ + 1) % sources_.size();
  return true;
}

std::vector<float> state_fetch::take_values() { return std::move(values_); }

}  // namespace atl
