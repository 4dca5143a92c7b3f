#include "actors/decisions/warm_start.hpp"

#include <algorithm>

namespace atl {

warm_start::outcome warm_start::begin(const std::vector<std::string>& donors, const std::string& self) {
  donors_.clear();
  for (const auto& d : donors)
    if (d != self && std::find(donors_.begin(), donors_.end(), d) == donors_.end()) donors_.push_back(d);
  donor_ = 0;
  snapshot_ = 0;
  last_failure_.clear();
  active_ = size_ > 0 && !donors_.empty();
  if (size_ == 0) last_failure_ = "this replica has no inner-optimizer state to take";
  else if (donors_.empty()) last_failure_ = "no live peer to take it from";
  return active_ ? outcome::more : outcome::cold;
}

warm_start::request warm_start::next_request() const {
  if (snapshot_ == 0) return {donor(), 0, 0, std::min(chunk_, size_)};
  const auto r = fetch_.next_request();
  return {r.keeper, snapshot_, r.offset, r.count};
}

warm_start::outcome warm_start::on_reply(const reply& r, const std::vector<float>& values) {
  if (!active_ || r.sender != donor()) return outcome::ignored;
  if (snapshot_ == 0) {  // the first reply: the snapshot's header
    if (r.offset != 0) return outcome::ignored;
    if (!r.found || r.snapshot == 0) return next_donor("has no inner-optimizer state to give");
    if (r.count != size_)
      return next_donor("holds " + std::to_string(r.count) + " values of inner-optimizer state, this replica " +
                        std::to_string(size_));
    snapshot_ = r.snapshot;
    adam_step_ = r.adam_step;
    digest_ = r.digest;
    fetch_ = state_fetch(snapshot_, r.count, r.digest, {r.sender}, chunk_);
  } else if (r.snapshot != snapshot_) {
    return outcome::ignored;
  }
  switch (fetch_.on_reply(r.sender, r.snapshot, r.offset, r.found, values)) {
    case state_fetch::outcome::ignored: return outcome::ignored;
    case state_fetch::outcome::more: return outcome::more;
    case state_fetch::outcome::done: active_ = false; return outcome::warm;
    case state_fetch::outcome::failed: break;
  }
  return next_donor(r.found ? "sent values that do not match its digest" : "no longer holds its snapshot");
}

warm_start::outcome warm_start::on_timeout() {
  if (!active_) return outcome::ignored;
  return next_donor("did not answer");
}

warm_start::outcome warm_start::next_donor(std::string why) {
  last_failure_ = donor() + " " + std::move(why);
  fetch_.cancel();
  snapshot_ = 0;
  if (++donor_ < donors_.size()) return outcome::more;
  active_ = false;
  return outcome::cold;
}

}  // namespace atl
