#include "actors/decisions/data_cursor.hpp"

#include <algorithm>
#include <set>

namespace atl::data {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finalizer
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Adds s to a sorted list of disjoint spans, merging what touches it.
void add_span(std::vector<span>& spans, span s) {
  std::vector<span> out;
  out.reserve(spans.size() + 1);
  for (const auto& x : spans) {
    if (x.end < s.begin || s.end < x.begin) {
      out.push_back(x);
    } else {
      s = {std::min(s.begin, x.begin), std::max(s.end, x.end)};
    }
  }
  out.insert(
      std::upper_bound(out.begin(), out.end(), s, [](const span& a, const span& b) { return a.begin < b.begin; }), s);
  spans = std::move(out);
}

bool overlaps(const std::vector<span>& spans, span s) {
  return std::any_of(spans.begin(), spans.end(), [&](const span& x) { return x.begin < s.end && s.begin < x.end; });
}

bool covers(const std::vector<span>& spans, span whole) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const span& x) { return x.begin <= whole.begin && whole.end <= x.end; });
}

std::uint64_t length(span s) { return s.end - s.begin; }

bool contains(const std::vector<std::string>& workers, const std::string& w) {
  return std::find(workers.begin(), workers.end(), w) != workers.end();
}

}  // namespace

std::uint64_t unit_at(std::uint64_t seed, std::uint64_t epoch, std::uint64_t position, std::uint64_t units) {
  if (units <= 1) return 0;
  unsigned bits = 0;
  while (bits < 64 && (std::uint64_t{1} << bits) < units) ++bits;
  const unsigned half = (bits + 1) / 2;  // a domain of 4^half >= units: under 4 walks expected
  const std::uint64_t mask = (std::uint64_t{1} << half) - 1;
  const std::uint64_t key = mix(seed ^ mix(epoch + 1));
  std::uint64_t x = position;
  do {
    std::uint64_t left = x >> half, right = x & mask;
    for (std::uint64_t round = 0; round < 4; ++round) {
      const std::uint64_t next = left ^ (mix(key ^ (round << 56) ^ right) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= units);  // cycle walking: a permutation of the domain, restricted to [0, units)
  return x;
}

const char* to_string(chunk_state s) {
  switch (s) {
    case chunk_state::leased: return "leased";
    case chunk_state::consumed: return "consumed";
    case chunk_state::partial: return "partial";
    case chunk_state::returned: return "returned";
  }
  return "?";
}

expected<data_cursor> data_cursor::make(const cursor_config& config) {
  if (config.units == 0) return make_error(errc::invalid_config, "data cursor: the data has no units");
  if (config.chunk == 0) return make_error(errc::invalid_config, "data cursor: a chunk of 0 units");
  if (config.fragments == 0 || config.fragments > max_fragments)
    return make_error(errc::invalid_config, "data cursor: " + std::to_string(config.fragments) + " fragments (1 to " +
                                                std::to_string(max_fragments) + ")");
  data_cursor made(config);
  made.commit_epochs_.assign(config.fragments, 0);
  return made;
}

cursor_snapshot data_cursor::snapshot() const {
  auto snap = snapshot_without_chunks();
  for (const auto& [id, c] : chunks_)
    snap.chunks.push_back({id, c.state, c.holder, c.holder_gone, c.tied, c.consumed, c.ledger, c.gone_epoch});
  return snap;
}

expected<data_cursor> data_cursor::restore(const cursor_snapshot& snap) {
  auto made = make(snap.config);
  if (!made) return made;
  auto& c = *made;
  const auto damaged = [](const std::string& what) { return make_error(errc::bad_data, "data cursor: " + what); };
  const auto fits = [&](chunk_id id) { return id.index < c.chunks_per_epoch(); };
  const auto spans_fit = [&](chunk_id id, const std::vector<span>& spans) {
    const auto whole = c.positions_of(id);
    return std::all_of(spans.begin(), spans.end(),
                       [&](const span& s) { return s.begin < s.end && whole.begin <= s.begin && s.end <= whole.end; });
  };
  if (snap.next_fresh > c.chunks_per_epoch()) return damaged("the next fresh chunk is past its epoch");
  c.lease_epoch_ = snap.lease_epoch;
  c.next_fresh_ = snap.next_fresh;
  for (const auto& e : snap.chunks) {
    if (!fits(e.id) || e.tied.size() != snap.config.fragments || e.consumed.size() != snap.config.fragments)
      return damaged("chunk " + std::to_string(e.id.index) + " of epoch " + std::to_string(e.id.epoch));
    for (std::size_t f = 0; f < e.tied.size(); ++f)
      if (!spans_fit(e.id, e.tied[f]) || !spans_fit(e.id, e.consumed[f]))
        return damaged("spans outside chunk " + std::to_string(e.id.index));
    for (const auto& l : e.ledger)
      if (l.fragment >= snap.config.fragments || !spans_fit(e.id, {l.positions}))
        return damaged("a ledger entry outside chunk " + std::to_string(e.id.index));
    c.chunks_[e.id] = {e.state, e.holder, e.holder_gone, e.tied, e.consumed, e.ledger, e.gone_epoch};
    if (e.state == chunk_state::leased && e.holder_gone) c.awaiting_commits_.insert(e.id);
  }
  if (!snap.commit_epochs.empty() && snap.commit_epochs.size() != snap.config.fragments)
    return damaged("commit epochs for " + std::to_string(snap.commit_epochs.size()) + " fragments");
  if (!snap.commit_epochs.empty()) c.commit_epochs_ = snap.commit_epochs;  // else all 0 (a record before them)
  const auto in_state = [&](chunk_id id, chunk_state s) {
    auto it = c.chunks_.find(id);
    return it != c.chunks_.end() && it->second.state == s;
  };
  // The pool is exactly the chunks in state returned, each once: a chunk named twice would
  // be leased twice, one left out never again.
  std::set<chunk_id> pool(snap.returned.begin(), snap.returned.end());
  const auto returned_state = std::count_if(c.chunks_.begin(), c.chunks_.end(),
                                            [](const auto& e) { return e.second.state == chunk_state::returned; });
  if (pool.size() != snap.returned.size() || static_cast<std::ptrdiff_t>(pool.size()) != returned_state)
    return damaged("the returned pool does not list each returned chunk once");
  for (const auto& id : snap.returned)
    if (!in_state(id, chunk_state::returned)) return damaged("a returned chunk that is not");
  c.returned_ = snap.returned;
  for (const auto& t : snap.ties) {
    if (!in_state(t.chunk, chunk_state::leased) || t.fragment >= snap.config.fragments ||
        !spans_fit(t.chunk, {t.positions}))
      return damaged("a tie to chunk " + std::to_string(t.chunk.index) + " that is not leased");
    c.ties_.push_back(t);
  }
  for (const auto& r : snap.recent) {
    if (r.fragment >= snap.config.fragments) return damaged("a commit of a fragment the run has not");
    c.recent_[r.fragment][r.round] = {r.taken, r.late};
  }
  return made;
}

std::uint64_t data_cursor::chunks_per_epoch() const {
  // Not (units + chunk - 1) / chunk: with a chunk near 2^64 that wraps to 0, and lease()
  // would look for a fresh chunk for ever (the fuzzer found it).
  return config_.units / config_.chunk + (config_.units % config_.chunk != 0);
}

span data_cursor::positions_of(chunk_id chunk) const {
  const std::uint64_t begin = chunk.index * config_.chunk;
  return {begin, begin + std::min(config_.chunk, config_.units - begin)};  // no sum past 2^64
}

cursor_snapshot data_cursor::snapshot_without_chunks() const {
  cursor_snapshot snap;
  snap.config = config_;
  snap.lease_epoch = lease_epoch_;
  snap.next_fresh = next_fresh_;
  snap.returned = returned_;
  snap.ties = ties_;
  for (const auto& [fragment, rounds] : recent_)
    for (const auto& [round, commit] : rounds) snap.recent.push_back({fragment, round, commit.taken, commit.late});
  snap.commit_epochs = commit_epochs_;
  return snap;
}

std::vector<cursor_snapshot::chunk_entry> data_cursor::chunks_between(chunk_id first, chunk_id last) const {
  std::vector<cursor_snapshot::chunk_entry> out;
  for (auto it = chunks_.lower_bound(first); it != chunks_.end() && !(last < it->first); ++it) {
    const auto& [id, c] = *it;
    out.push_back({id, c.state, c.holder, c.holder_gone, c.tied, c.consumed, c.ledger, c.gone_epoch});
  }
  return out;
}

std::vector<chunk_id> data_cursor::take_changed() {
  std::vector<chunk_id> out(changed_.begin(), changed_.end());
  changed_.clear();
  return out;
}

std::optional<chunk_id> data_cursor::lease(const std::string& worker) {
  chunk_id id;
  if (!returned_.empty()) {
    id = returned_.front();
    returned_.erase(returned_.begin());
  } else {
    while (next_fresh_ >= chunks_per_epoch()) {
      ++lease_epoch_;
      next_fresh_ = 0;
    }
    if (config_.epochs != 0 && lease_epoch_ >= config_.epochs) return std::nullopt;
    id = {lease_epoch_, next_fresh_++};
  }
  auto& c = chunks_[id];
  changed_.insert(id);
  c = chunk_record{};
  c.holder = worker;
  c.tied.assign(config_.fragments, {});
  c.consumed.assign(config_.fragments, {});
  return id;
}

status data_cursor::tie(const std::string& worker, std::uint32_t fragment, std::uint64_t round, chunk_id chunk,
                        span positions) {
  auto it = chunks_.find(chunk);
  // (6) The tie of a worker that was gone by the time it came (it rode in a RoundReport sent
  // again after a head restart): the chunk, settled and not leased again since, reopens.
  const bool reopen = it != chunks_.end() && reopens(it->second, chunk, worker);
  if (it == chunks_.end() || (it->second.state != chunk_state::leased && !reopen) || it->second.holder != worker)
    return make_error(errc::not_participant, "data cursor: chunk " + std::to_string(chunk.index) + " of epoch " +
                                                 std::to_string(chunk.epoch) + " is not leased to " + worker);
  if (fragment >= config_.fragments)
    return make_error(errc::unknown_fragment,
                      "data cursor: fragment " + std::to_string(fragment) + " of " + std::to_string(config_.fragments));
  const auto whole = positions_of(chunk);
  if (positions.begin >= positions.end || positions.begin < whole.begin || positions.end > whole.end)
    return make_error(errc::bad_data, "data cursor: positions outside their chunk, or none");
  auto& c = it->second;
  if (overlaps(c.tied[fragment], positions))
    return make_error(errc::duplicate, "data cursor: positions already tied for fragment " + std::to_string(fragment));
  changed_.insert(chunk);
  if (reopen) {
    c.state = chunk_state::leased;
    returned_.erase(std::remove(returned_.begin(), returned_.end(), chunk), returned_.end());
  }
  add_span(c.tied[fragment], positions);
  tie_record t{worker, fragment, round, chunk, positions, false};
  // The round may have committed before the tie came (the two travel apart).
  const auto& recent = recent_[fragment];
  const auto same = recent.find(round), next = recent.find(round + 1);
  if (same != recent.end()) {
    if (contains(same->second.taken, worker)) {
      consume(t, round);
    } else if (next != recent.end()) {
      if (contains(next->second.late, worker)) consume(t, round + 1);  // else lost for the fragment
    } else {
      t.missed_once = true;
      ties_.push_back(t);
    }
  } else if (!recent.empty() && round < recent.rbegin()->first) {
    // lost: its round was passed over (skipped, or closed and the next too)
  } else {
    ties_.push_back(t);
  }
  settle(chunk);
  return {};
}

status data_cursor::tie_all(const std::string& worker, std::uint32_t fragment, std::uint64_t round,
                            const std::vector<piece>& pieces) {
  // What tie() may change: the records of the pieces' chunks (it creates none), the waiting
  // ties (it only appends), and the returned and awaiting sets (a reopen or a settle moves
  // a chunk in or out of them; both hold chunks in flight, not the run's history).
  std::map<chunk_id, chunk_record> chunks_before;
  for (const auto& p : pieces)
    if (auto it = chunks_.find(p.chunk); it != chunks_.end()) chunks_before.emplace(p.chunk, it->second);
  const auto ties_before = ties_.size();
  const auto returned_before = returned_;
  const auto awaiting_before = awaiting_commits_;
  for (const auto& p : pieces) {
    if (auto err = tie(worker, fragment, round, p.chunk, p.positions)) {
      for (auto& [id, record] : chunks_before) {
        chunks_.at(id) = std::move(record);
        changed_.insert(id);  // its bytes are what they were, but a bucket said again is harmless
      }
      ties_.resize(ties_before);
      returned_ = returned_before;
      awaiting_commits_ = awaiting_before;
      return err;
    }
  }
  return {};
}

void data_cursor::consume(const tie_record& t, std::uint64_t committed_in) {
  auto& c = chunks_.at(t.chunk);
  changed_.insert(t.chunk);
  add_span(c.consumed[t.fragment], t.positions);
  c.ledger.push_back({t.fragment, committed_in, t.positions});
}

void data_cursor::committed(std::uint32_t fragment, std::uint64_t round, std::uint64_t epoch,
                            const std::vector<std::string>& taken, const std::vector<std::string>& late) {
  if (fragment >= config_.fragments) return;
  commit_epochs_[fragment] = std::max(commit_epochs_[fragment], epoch);
  auto& recent = recent_[fragment];
  recent[round] = {taken, late};
  while (recent.size() > 2) recent.erase(recent.begin());  // a tie is at most one round late
  std::vector<chunk_id> touched;
  std::vector<tie_record> kept;
  for (auto& t : ties_) {
    if (t.fragment != fragment || t.round > round) {
      kept.push_back(t);
      continue;
    }
    touched.push_back(t.chunk);
    if (t.round == round && contains(taken, t.worker)) {
      consume(t, round);
    } else if (t.round == round) {
      t.missed_once = true;  // the next round may take it late
      kept.push_back(t);
    } else if (t.round + 1 == round && t.missed_once && contains(late, t.worker)) {
      consume(t, round);
    }  // else lost for this fragment: the worker resynced
  }
  ties_ = std::move(kept);
  // Gone holders' chunks this commit may release (4), beside the ones it touched.
  touched.insert(touched.end(), awaiting_commits_.begin(), awaiting_commits_.end());
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (const auto& id : touched) settle(id);
}

void data_cursor::worker_gone(const std::string& worker, std::uint64_t epoch) {
  std::vector<chunk_id> held;
  for (auto& [id, c] : chunks_)
    if (c.state == chunk_state::leased && c.holder == worker && !c.holder_gone) {
      changed_.insert(id);
      c.holder_gone = true;
      c.gone_epoch = epoch;
      held.push_back(id);
    }
  for (const auto& id : held) settle(id);
}

void data_cursor::run_finished() {
  const std::vector<chunk_id> waiting(awaiting_commits_.begin(), awaiting_commits_.end());
  for (const auto& id : waiting) {
    chunks_.at(id).gone_epoch = 0;
    changed_.insert(id);
    settle(id);
  }
}

bool data_cursor::every_fragment_committed_since(std::uint64_t epoch) const {
  return std::all_of(commit_epochs_.begin(), commit_epochs_.end(), [&](std::uint64_t e) { return e >= epoch; });
}

bool data_cursor::reopens(const chunk_record& c, chunk_id chunk, const std::string& worker) const {
  if (c.holder != worker || !c.holder_gone) return false;
  if (c.state == chunk_state::partial) return true;
  return c.state == chunk_state::returned && std::find(returned_.begin(), returned_.end(), chunk) != returned_.end();
}

std::optional<std::uint64_t> data_cursor::last_committed(std::uint32_t fragment) const {
  auto it = recent_.find(fragment);
  if (it == recent_.end() || it->second.empty()) return std::nullopt;
  return it->second.rbegin()->first;
}

bool data_cursor::pending(chunk_id chunk) const {
  return std::any_of(ties_.begin(), ties_.end(), [&](const tie_record& t) { return t.chunk == chunk; });
}

void data_cursor::settle(chunk_id chunk) {
  auto& c = chunks_.at(chunk);
  if (c.state != chunk_state::leased || pending(chunk)) return;
  const auto whole = positions_of(chunk);
  const auto all = [&](const std::vector<std::vector<span>>& per_fragment) {
    return std::all_of(per_fragment.begin(), per_fragment.end(), [&](const auto& s) { return covers(s, whole); });
  };
  if (!c.holder_gone && !all(c.tied)) return;  // its worker still trains or contributes it
  if (c.holder_gone && !all(c.tied) && !every_fragment_committed_since(c.gone_epoch)) {
    awaiting_commits_.insert(chunk);  // a report still to come may tie its holder's work (4)
    return;
  }
  awaiting_commits_.erase(chunk);
  changed_.insert(chunk);
  if (all(c.consumed)) {
    c.state = chunk_state::consumed;
  } else if (!c.ledger.empty()) {
    c.state = chunk_state::partial;
  } else {
    c.state = chunk_state::returned;
    returned_.push_back(chunk);
  }
}

std::optional<chunk_state> data_cursor::state_of(chunk_id chunk) const {
  auto it = chunks_.find(chunk);
  if (it == chunks_.end()) return std::nullopt;
  return it->second.state;
}

const std::vector<consumption>& data_cursor::ledger_of(chunk_id chunk) const {
  static const std::vector<consumption> none;
  auto it = chunks_.find(chunk);
  return it == chunks_.end() ? none : it->second.ledger;
}

progress data_cursor::progress_now() const {
  progress p;
  p.units = config_.units;
  std::map<std::uint64_t, std::uint64_t> ended;  // chunks consumed or partial, per epoch
  for (const auto& [id, c] : chunks_)
    if (c.state == chunk_state::consumed || c.state == chunk_state::partial) ++ended[id.epoch];
  while (ended.count(p.epoch) && ended.at(p.epoch) == chunks_per_epoch()) ++p.epoch;
  p.finished = config_.epochs != 0 && p.epoch >= config_.epochs;
  for (const auto& [id, c] : chunks_) {
    const auto n = length(positions_of(id));
    if (c.state == chunk_state::leased) p.in_flight += n;
    if (c.state == chunk_state::returned) p.returned += n;
    if (id.epoch != p.epoch) continue;
    if (c.state == chunk_state::consumed) p.consumed += n;
    if (c.state == chunk_state::partial) p.partial += n;
  }
  return p;
}

}  // namespace atl::data
