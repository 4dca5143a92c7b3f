#include "actors/shared/membership_delta.hpp"

#include <algorithm>
#include <iterator>

#include "actors/decisions/placement.hpp"
#include "runtime/core/digest.hpp"

namespace atl {
namespace {

std::uint64_t text_hash(const std::string& text) { return digest64(text.data(), text.size()); }

std::uint64_t workers_sum(const std::vector<std::string>& workers) {
  std::uint64_t sum = 0;
  for (const auto& w : workers) sum += text_hash(w);
  return sum;
}

// Epoch, the workers' hash sum, quorum and keepers with their groups (a few: hashed in order).
std::uint64_t mix(const membership_view& view, std::uint64_t worker_sum) {
  std::uint64_t keepers = 0;
  for (const auto& k : view.keepers) keepers = keepers * 1099511628211ull + text_hash(k);
  for (const auto size : view.keeper_group_sizes) keepers = keepers * 1099511628211ull + size;  // none: one group
  const std::uint64_t words[4] = {view.epoch, worker_sum, view.quorum, keepers};
  return digest64(words, sizeof words);
}

void sort_unique(std::vector<std::string>& v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

template <typename List>
std::vector<std::string> texts(List list) {
  std::vector<std::string> out;
  out.reserve(list.size());
  for (const auto t : list) out.emplace_back(t.cStr());
  return out;
}

template <typename Builder>
void fill(Builder list, const std::vector<std::string>& from) {
  for (unsigned i = 0; i < from.size(); ++i) list.set(i, from[i]);
}

}  // namespace

std::uint64_t members_digest(const membership_view& view) { return mix(view, workers_sum(view.workers)); }

membership_delta whole_membership(membership_view view) {
  sort_unique(view.workers);
  membership_delta d;
  d.digest = members_digest(view);
  d.view = std::move(view);
  return d;
}

membership_delta diff_membership(const membership_view& from, const membership_view& to) {
  membership_delta d;
  d.delta = true;
  d.base_epoch = from.epoch;
  d.view.epoch = to.epoch;
  d.view.quorum = to.quorum;
  d.view.keepers = to.keepers;
  d.view.keeper_group_sizes = to.keeper_group_sizes;
  std::set_difference(to.workers.begin(), to.workers.end(), from.workers.begin(), from.workers.end(),
                      std::back_inserter(d.view.workers));
  std::set_difference(from.workers.begin(), from.workers.end(), to.workers.begin(), to.workers.end(),
                      std::back_inserter(d.removed));
  d.digest = members_digest(to);
  return d;
}

std::uint64_t held_membership::digest() const { return mix(view_, worker_sum_); }

held_membership::verdict held_membership::apply(const membership_delta& d) {
  if (holds_ && d.view.epoch < view_.epoch) return verdict::unchanged;  // late
  if (holds_ && d.view.epoch == view_.epoch && d.digest == digest()) return verdict::unchanged;
  if (!d.delta) {
    auto whole = d.view;
    sort_unique(whole.workers);
    worker_sum_ = workers_sum(whole.workers);  // the whole is the sender's: no digest to reach
    view_ = std::move(whole);
    holds_ = true;
    return verdict::changed;
  }
  if (!holds_ || d.base_epoch != view_.epoch) return verdict::needs_whole;  // a gap
  // Applied to a copy of the list (a coordinator holds one, a few KB): a delta that does not
  // reach the sender's digest leaves the Membership held as it was.
  membership_view next;
  next.epoch = d.view.epoch;
  next.quorum = d.view.quorum;
  next.keepers = d.view.keepers;
  next.keeper_group_sizes = d.view.keeper_group_sizes;
  auto sum = worker_sum_;
  auto removed = d.removed;
  sort_unique(removed);
  std::vector<std::string> kept;
  std::set_difference(view_.workers.begin(), view_.workers.end(), removed.begin(), removed.end(),
                      std::back_inserter(kept));
  for (const auto& w : removed)
    if (std::binary_search(view_.workers.begin(), view_.workers.end(), w)) sum -= text_hash(w);
  auto added = d.view.workers;
  sort_unique(added);
  for (const auto& w : added)
    if (!std::binary_search(kept.begin(), kept.end(), w)) sum += text_hash(w);
  std::set_union(kept.begin(), kept.end(), added.begin(), added.end(), std::back_inserter(next.workers));
  if (mix(next, sum) != d.digest) return verdict::needs_whole;
  view_ = std::move(next);
  worker_sum_ = sum;
  return verdict::changed;
}

void write_membership(const membership_delta& d, schema::Membership::Builder out) {
  out.setEpoch(d.view.epoch);
  fill(out.initWorkers(static_cast<unsigned>(d.view.workers.size())), d.view.workers);
  out.setQuorum(d.view.quorum);
  fill(out.initKeepers(static_cast<unsigned>(d.view.keepers.size())), d.view.keepers);
  out.setDelta(d.delta);
  out.setBaseEpoch(d.base_epoch);
  fill(out.initRemovedWorkers(static_cast<unsigned>(d.removed.size())), d.removed);
  out.setDigest(d.digest);
  auto groups = out.initKeeperGroups(static_cast<unsigned>(d.view.keeper_group_sizes.size()));
  for (unsigned i = 0; i < d.view.keeper_group_sizes.size(); ++i) groups.set(i, d.view.keeper_group_sizes[i]);
}

membership_delta read_membership(schema::Membership::Reader in) {
  membership_delta d;
  d.view.epoch = in.getEpoch();
  d.view.workers = texts(in.getWorkers());
  d.view.quorum = in.getQuorum();
  d.view.keepers = texts(in.getKeepers());
  d.delta = in.getDelta();
  d.base_epoch = in.getBaseEpoch();
  d.removed = texts(in.getRemovedWorkers());
  d.digest = in.getDigest();
  for (const auto size : in.getKeeperGroups()) d.view.keeper_group_sizes.push_back(size);
  return d;
}

std::vector<std::string> keepers_of_unit(const membership_view& view, std::uint32_t unit) {
  const auto& sizes = view.keeper_group_sizes;
  if (sizes.empty()) return view.keepers;
  const auto group = placement::keeper_group_of(unit, sizes.size());
  std::size_t first = 0;
  for (std::size_t g = 0; g < group; ++g) first += sizes[g];
  if (first + sizes[group] > view.keepers.size()) return {};  // sizes that do not add up: the head's
  return {view.keepers.begin() + static_cast<std::ptrdiff_t>(first),
          view.keepers.begin() + static_cast<std::ptrdiff_t>(first + sizes[group])};
}

}  // namespace atl
