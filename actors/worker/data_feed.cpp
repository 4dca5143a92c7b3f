#include "actors/worker/data_feed.hpp"

#include <algorithm>

namespace atl {

data_feed::data_feed(std::uint64_t units, std::uint64_t chunk, std::uint64_t per_step, std::size_t fragments)
    : units_(units), chunk_(chunk), per_step_(per_step), covered_until_(fragments, 0) {}

bool data_feed::leased(data::chunk_id id, data::span positions, std::uint64_t seed) {
  if (!given_.insert(id).second) return false;
  if (positions.end > positions.begin) leases_.push_back({id, positions.begin, positions.end, seed});
  return true;
}

std::uint64_t data_feed::waiting() const {
  std::uint64_t n = 0;
  for (const auto& l : leases_) n += l.end - l.next;
  return n;
}

std::optional<std::vector<std::uint64_t>> data_feed::take_step(std::int64_t step) {
  if (waiting() < per_step_) return std::nullopt;
  std::vector<std::uint64_t> ids;
  auto& pieces = trained_[step];
  while (ids.size() < per_step_) {
    auto& l = leases_.front();
    const auto take = std::min<std::uint64_t>(l.end - l.next, per_step_ - ids.size());
    for (auto p = l.next; p < l.next + take; ++p) ids.push_back(data::unit_at(l.seed, l.id.epoch, p, units_));
    pieces.push_back({l.id, {l.next, l.next + take}});
    l.next += take;
    if (l.next == l.end) leases_.pop_front();
  }
  return ids;
}

std::vector<data_feed::piece> data_feed::contribution(std::size_t f, std::int64_t until) {
  std::vector<piece> out;
  if (f >= covered_until_.size()) return out;
  for (auto it = trained_.lower_bound(covered_until_[f]); it != trained_.end() && it->first < until; ++it)
    for (const auto& p : it->second) {
      if (!out.empty() && out.back().chunk == p.chunk && out.back().positions.end == p.positions.begin)
        out.back().positions.end = p.positions.end;
      else out.push_back(p);
    }
  covered_until_[f] = std::max(covered_until_[f], until);
  // Steps every fragment has covered are no longer needed.
  const auto oldest = *std::min_element(covered_until_.begin(), covered_until_.end());
  trained_.erase(trained_.begin(), trained_.lower_bound(oldest));
  return out;
}

}  // namespace atl
