#include "actors/decisions/warm_start.hpp"

#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

using outcome = warm_start::outcome;

std::vector<float> moments(std::size_t n, float base) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = base + 0.25f * static_cast<float>(i);
  return v;
}

// A donor as the worker's handler answers: a snapshot of `state` at adam step `step`.
struct fake_donor {
  std::string id;
  std::vector<float> state;
  std::int64_t step = 0;
  std::uint64_t snapshot_id = 0;
  std::uint64_t digest() const { return digest64(state.data(), state.size() * sizeof(float)); }

  warm_start::reply answer(const warm_start::request& req, std::vector<float>& values) {
    if (req.snapshot == 0) ++snapshot_id;
    values.assign(state.begin() + static_cast<std::ptrdiff_t>(req.offset),
                  state.begin() + static_cast<std::ptrdiff_t>(req.offset + req.count));
    return {id, snapshot_id, true, step, state.size(), digest(), req.offset};
  }
};

// Drives the exchange until it stops asking; the outcomes of every reply in order.
std::vector<outcome> run(warm_start& w, std::vector<fake_donor*> donors) {
  std::vector<outcome> seen;
  while (w.active()) {
    const auto req = w.next_request();
    auto donor = std::find_if(donors.begin(), donors.end(), [&](auto* d) { return d->id == req.donor; });
    if (donor == donors.end()) {
      seen.push_back(w.on_timeout());
      continue;
    }
    std::vector<float> values;
    const auto reply = (*donor)->answer(req, values);
    seen.push_back(w.on_reply(reply, values));
  }
  return seen;
}

TEST(WarmStart, TheDonorsSnapshotArrivesInChunksAndMatchesItsDigest) {
  fake_donor donor{"worker/1.0", moments(10, -1.0f), 42};
  warm_start w(10, 4);
  ASSERT_EQ(w.begin({"worker/1.0"}, "worker/2.0"), outcome::more);
  EXPECT_EQ(w.next_request().snapshot, 0u);  // the first asks for a new snapshot
  EXPECT_EQ(run(w, {&donor}), (std::vector<outcome>{outcome::more, outcome::more, outcome::warm}));
  EXPECT_EQ(w.adam_step(), 42);
  EXPECT_EQ(w.digest(), donor.digest());
  EXPECT_EQ(w.take_values(), donor.state);
  EXPECT_EQ(donor.snapshot_id, 1u);  // one snapshot, its later chunks named by its id
}

// Each way a donor can fail sends the joiner to the next one, from a new snapshot; with no
// donor left it starts cold and says why.
TEST(WarmStart, EveryFailureMovesOnAndTheLastOneLeavesItCold) {
  struct row {
    const char* what;
    std::function<void(warm_start::reply&, std::vector<float>&)> spoil;  // applied to the first donor's replies
    const char* why;
  };
  const std::vector<row> rows = {
      {"nothing to give", [](auto& r, auto&) { r.found = false; }, "has no inner-optimizer state"},
      {"another model", [](auto& r, auto&) { r.count = 11; }, "holds 11 values"},
      {"wrong bytes", [](auto&, auto& v) { v[0] += 1.0f; }, "do not match its digest"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    fake_donor good{"worker/3.0", moments(6, 2.0f), 7};
    warm_start w(6, 4);
    ASSERT_EQ(w.begin({"worker/1.0", "worker/3.0"}, "worker/2.0"), outcome::more);
    fake_donor bad{"worker/1.0", moments(6, 5.0f), 9};
    bool moved_on = false;
    while (w.active()) {
      const auto req = w.next_request();
      std::vector<float> values;
      auto& donor = req.donor == bad.id ? bad : good;
      auto reply = donor.answer(req, values);
      if (&donor == &bad) row.spoil(reply, values);
      const auto out = w.on_reply(reply, values);
      if (&donor == &good && req.snapshot == 0) {
        moved_on = true;
        EXPECT_NE(w.last_failure().find(row.why), std::string::npos) << w.last_failure();
      }
      if (out == outcome::warm) break;
      ASSERT_EQ(out, outcome::more);
    }
    EXPECT_TRUE(moved_on);
    EXPECT_EQ(w.take_values(), good.state);
    EXPECT_EQ(w.adam_step(), 7);
  }
  warm_start w(6, 4);
  ASSERT_EQ(w.begin({"worker/1.0"}, "worker/2.0"), outcome::more);
  EXPECT_EQ(w.on_timeout(), outcome::cold);
  EXPECT_EQ(w.last_failure(), "worker/1.0 did not answer");
  EXPECT_FALSE(w.active());
}

TEST(WarmStart, NobodyToAskOrNothingToTakeIsColdAtOnce) {
  warm_start w(6, 4);
  EXPECT_EQ(w.begin({"worker/2.0", "worker/2.0"}, "worker/2.0"), outcome::cold);  // only itself
  EXPECT_EQ(w.last_failure(), "no live peer to take it from");
  warm_start none(0, 4);  // a user's own loop: no state the replica can share
  EXPECT_EQ(none.begin({"worker/1.0"}, "worker/2.0"), outcome::cold);
  EXPECT_EQ(none.last_failure(), "this replica has no inner-optimizer state to take");
}

// Replies from elsewhere, of another snapshot, or at an offset not asked for change nothing.
TEST(WarmStart, StrayRepliesAreIgnored) {
  fake_donor donor{"worker/1.0", moments(8, 0.5f), 3};
  warm_start w(8, 4);
  ASSERT_EQ(w.begin({"worker/1.0"}, "worker/2.0"), outcome::more);
  std::vector<float> values;
  auto first = donor.answer(w.next_request(), values);
  auto stranger = first;
  stranger.sender = "worker/9.0";
  EXPECT_EQ(w.on_reply(stranger, values), outcome::ignored);
  auto late = first;
  late.offset = 4;
  EXPECT_EQ(w.on_reply(late, values), outcome::ignored);  // the header must come first
  ASSERT_EQ(w.on_reply(first, values), outcome::more);
  auto old_snapshot = donor.answer(w.next_request(), values);
  old_snapshot.snapshot = 99;
  EXPECT_EQ(w.on_reply(old_snapshot, values), outcome::ignored);
  auto next = donor.answer(w.next_request(), values);
  EXPECT_EQ(w.on_reply(next, values), outcome::warm);
  EXPECT_EQ(w.take_values(), donor.state);
}

}  // namespace
}  // namespace atl
