// actors/decisions/fragment_sync: the worker's per-fragment sync, transition by transition, and its
// decisions one row per case.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <limits>

#include "actors/decisions/fragment_sync.hpp"
#include "runtime/core/digest.hpp"

namespace atl {
namespace {

using P = fragment_sync::phase;
using namespace std::chrono_literals;

// A round's change as a worker receives it, here fp32 (exact).
encoded_values update_of(const std::vector<float>& change) {
  encoded_values v;
  v.kind = codec_kind::fp32;
  v.count = change.size();
  v.payload.resize(change.size() * sizeof(float));
  if (!change.empty()) std::memcpy(v.payload.data(), change.data(), v.payload.size());
  return v;
}

encoded_values some_bytes() {
  encoded_values v;
  v.count = 4;
  v.payload = {1, 2, 3, 4};
  return v;
}

// A fragment synced at `round`, epoch 3.
fragment_sync synced_at(std::uint64_t round) {
  fragment_sync s;
  s.adopt(round, 3, {1.0f, 2.0f});
  return s;
}

// A fragment that contributed to round `round` (base round - 1), sent as seq 7 at t0.
fragment_sync awaiting(std::uint64_t round) {
  auto s = synced_at(round - 1);
  EXPECT_FALSE(s.contribute(round, 10, some_bytes()));
  s.sent(7, fragment_sync::time_point{});
  return s;
}

TEST(FragmentSync, ARoundTripFromAskingToMerged) {
  fragment_sync s;
  EXPECT_EQ(s.current(), P::asking);
  EXPECT_TRUE(s.state_on_its_way());
  EXPECT_EQ(s.state_arrived(4, 2), fragment_sync::on_state::adopt);
  s.adopt(4, 2, {1.0f, 2.0f});
  EXPECT_EQ(s.current(), P::synced);
  EXPECT_EQ(s.round(), 4u);
  ASSERT_FALSE(s.contribute(5, 12, some_bytes()));
  EXPECT_EQ(s.current(), P::awaiting_result);
  EXPECT_EQ(s.merge_at(), 12);
  EXPECT_FALSE(s.result_arrived(4, 2, {1.0f})) << "a result of another round";
  EXPECT_TRUE(s.result_arrived(5, 6, {1.0f, 2.0f}));
  EXPECT_EQ(s.current(), P::result_ready);
  EXPECT_EQ(s.epoch(), 6u);
  EXPECT_FALSE(s.result_arrived(5, 6, {1.0f, 2.0f})) << "a duplicate";
  auto values = s.take_result();
  ASSERT_TRUE(values);
  EXPECT_EQ(**values, (std::vector<float>{1.0f, 2.0f}));
  EXPECT_EQ(s.current(), P::synced);
  EXPECT_EQ(s.round(), 5u);
  EXPECT_EQ(s.pending().count, 0u);
}

TEST(FragmentSync, IllegalTransitionsAreTypedAndChangeNothing) {
  auto s = awaiting(5);
  const auto err = s.contribute(6, 20, some_bytes());
  EXPECT_EQ(err.code, errc::unexpected_message);
  EXPECT_EQ(s.pending_round(), 5u);
  EXPECT_EQ(s.current(), P::awaiting_result);
  const auto taken = s.take_result();
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.err().code, errc::unexpected_message);
  EXPECT_EQ(s.current(), P::awaiting_result);
}

// Rank 0's StateRequest carries its parameters only while the coordinator may need them
// to seed the fragment: F bytes every retry otherwise, on a slow link.
TEST(FragmentSync, WhetherAStateRequestCarriesTheParameters) {
  struct row {
    const char* what;
    std::vector<int> held;  // StateHeld replies in order: 1 seedHeld, 0 not
    bool adopted;
    bool wanted;
  };
  const row rows[] = {
      {"fresh: the first request asks without them", {}, false, false},
      {"held, seed held", {1}, false, false},
      {"held, no seed (a new coordinator)", {0}, false, true},
      {"seed held, then a new coordinator without it", {1, 0}, false, true},
      {"a state adopted: the run is seeded", {}, true, false},
      {"a state adopted, then a coordinator without a seed", {0}, true, false},
  };
  for (const auto& r : rows) {
    fragment_sync s;
    if (r.adopted) s.adopt(2, 3, {1.0f});
    for (int h : r.held) s.held(h != 0);
    EXPECT_EQ(s.parameters_wanted(), r.wanted) << r.what;
    // Only a fragment that adopted nothing still holds its initial values (whose digest a
    // StateRequest names).
    EXPECT_EQ(s.never_adopted(), !r.adopted) << r.what;
  }
}

// A worker past a round's sync point says it skips that round in every StateRequest until
// a state is adopted; a round named less than again_after ago is not named again (the
// coordinator answered with an older state all the same: that round's only participant,
// or a state on its way), a later one is, and so is the same one once again_after passed.
TEST(FragmentSync, ASkippedRoundIsNamedUntilAStateIsAdoptedAndAtMostOnceAnInterval) {
  using std::chrono::seconds;
  const fragment_sync::time_point t0{};
  auto s = synced_at(1);
  ASSERT_TRUE(s.skip(3, t0, seconds(2)));
  s.ask();
  EXPECT_EQ(s.skips_round(), 3u);
  s.ask();  // a repeat names it too
  EXPECT_EQ(s.skips_round(), 3u);
  s.adopt(1, 3, {0.0f, 0.0f});  // answered with round 1 all the same
  EXPECT_EQ(s.skips_round(), 0u) << "named after a state was adopted";
  EXPECT_FALSE(s.skip(3, t0 + seconds(1), seconds(2))) << "asked again within the interval";
  EXPECT_FALSE(s.skip(2, t0 + seconds(1), seconds(2))) << "an older round within the interval";
  EXPECT_EQ(s.skips_round(), 0u);
  EXPECT_TRUE(s.skip(4, t0 + seconds(1), seconds(2))) << "a later round";
  EXPECT_EQ(s.skips_round(), 4u);
  s.adopt(1, 3, {0.0f, 0.0f});
  EXPECT_TRUE(s.skip(4, t0 + seconds(3), seconds(2))) << "the same round once the interval passed";
}

TEST(FragmentSync, AChunkedStateIsFetchedThenAdopted) {
  fragment_sync s;
  s.start_fetch(state_fetch(9, 4, 0, {"keeper/0"}, 2), 5);
  EXPECT_EQ(s.current(), P::fetching);
  EXPECT_EQ(s.state_arrived(9, 5), fragment_sync::on_state::ignore) << "the round already on its way";
  EXPECT_EQ(s.state_arrived(10, 6), fragment_sync::on_state::adopt) << "a newer one replaces it";
  s.ask();
  EXPECT_EQ(s.current(), P::asking);
  EXPECT_FALSE(s.fetch().active());
}

struct state_row {
  const char* name;
  fragment_sync start;
  std::uint64_t round, epoch;
  fragment_sync::on_state expected;
  P after;
  std::uint64_t epoch_after;
};

TEST(FragmentSync, WhatAFragmentStateDoesInEachPhase) {
  auto asked_after_refusal = awaiting(5);
  ASSERT_EQ(asked_after_refusal.refused(errc::wrong_round, 7, 3), fragment_sync::on_refusal::ask_state);
  asked_after_refusal.ask();
  const std::vector<state_row> rows = {
      {"asked, nothing kept", fragment_sync{}, 3, 4, fragment_sync::on_state::adopt, P::asking, 0},
      {"asked after a refusal, our round open", asked_after_refusal, 4, 8,
       fragment_sync::on_state::send_again_and_resume, P::awaiting_result, 8},
      {"asked after a refusal, past our round", asked_after_refusal, 5, 8, fragment_sync::on_state::adopt, P::asking,
       3},
      {"unasked, our round reopened", awaiting(5), 4, 9, fragment_sync::on_state::send_again, P::awaiting_result, 9},
      {"unasked, reopened in an older epoch", awaiting(5), 4, 1, fragment_sync::on_state::send_again,
       P::awaiting_result, 3},
      {"unasked, our round committed", awaiting(5), 5, 9, fragment_sync::on_state::resync, P::awaiting_result, 3},
      {"unasked, an older round", awaiting(5), 2, 9, fragment_sync::on_state::ignore, P::awaiting_result, 3},
      {"synced, the same round in a newer epoch", synced_at(4), 4, 9, fragment_sync::on_state::ignore, P::synced, 9},
      {"synced, another round", synced_at(4), 6, 9, fragment_sync::on_state::ignore, P::synced, 3},
  };
  for (auto r : rows) {
    EXPECT_EQ(r.start.state_arrived(r.round, r.epoch), r.expected) << r.name;
    EXPECT_EQ(r.start.current(), r.after) << r.name << ": " << to_string(r.start.current());
    EXPECT_EQ(r.start.epoch(), r.epoch_after) << r.name;
  }
}

struct refusal_row {
  const char* name;
  fragment_sync start;
  errc code;
  std::uint64_t seq, epoch;
  fragment_sync::on_refusal expected;
  std::uint64_t epoch_after;
};

TEST(FragmentSync, WhatARefusalDoes) {
  auto ready = awaiting(5);
  ASSERT_TRUE(ready.result_arrived(5, 3, {1.0f}));
  const std::vector<refusal_row> rows = {
      {"duplicate: it counted", awaiting(5), errc::duplicate, 7, 3, fragment_sync::on_refusal::ignore, 3},
      {"stale_epoch from a newer epoch", awaiting(5), errc::stale_epoch, 7, 4, fragment_sync::on_refusal::send_again,
       4},
      {"stale_epoch from no newer epoch", awaiting(5), errc::stale_epoch, 7, 3, fragment_sync::on_refusal::ask_state,
       3},
      {"wrong_round", awaiting(5), errc::wrong_round, 7, 9, fragment_sync::on_refusal::ask_state, 3},
      {"of an older sending", awaiting(5), errc::wrong_round, 6, 9, fragment_sync::on_refusal::ignore, 3},
      {"with the result here", ready, errc::wrong_round, 7, 9, fragment_sync::on_refusal::ignore, 3},
      {"while synced", synced_at(4), errc::wrong_round, 0, 9, fragment_sync::on_refusal::ignore, 3},
  };
  for (auto r : rows) {
    EXPECT_EQ(r.start.refused(r.code, r.seq, r.epoch), r.expected) << r.name;
    EXPECT_EQ(r.start.epoch(), r.epoch_after) << r.name;
  }
}

TEST(FragmentSync, WhatIsRepeatedOnATickAndAfterAReconnect) {
  using R = fragment_sync::retry;
  const fragment_sync::time_point t0{};
  fragment_sync fetching;
  fetching.start_fetch(state_fetch(9, 4, 0, {"keeper/0"}, 2), 5);
  fetching.chunk_asked(t0);
  struct row {
    const char* name;
    fragment_sync s;
    std::chrono::milliseconds at;
    R tick, reconnect;
  };
  const std::vector<row> rows = {
      {"asking", fragment_sync{}, 0ms, R::ask_state, R::ask_state},
      {"fetching, keeper not silent yet", fetching, 1999ms, R::none, R::next_chunk},
      {"fetching, keeper silent", fetching, 2000ms, R::next_keeper, R::next_chunk},
      {"awaiting, within the timeout", awaiting(5), 3000ms, R::none, R::send_again},
      {"awaiting, overdue", awaiting(5), 3001ms, R::send_again, R::send_again},
      {"synced", synced_at(4), 9000ms, R::none, R::none},
  };
  for (const auto& r : rows) {
    EXPECT_EQ(r.s.on_tick(t0 + r.at, 2000ms, 3000ms), r.tick) << r.name;
    EXPECT_EQ(r.s.on_link_restored(), r.reconnect) << r.name;
  }
}

std::uint64_t digest_of(const std::vector<float>& v) { return digest64(v.data(), v.size() * sizeof(float)); }

TEST(FragmentSync, ALowBitResultIsTheKeptThetaGlobalPlusItsChange) {
  auto s = awaiting(5);  // kept theta_global {1, 2}
  const std::vector<float> change = {0.5f, -1.0f}, after = {1.5f, 1.0f};
  auto arrived = s.update_arrived(5, 3, update_of(change), digest_of(after));
  ASSERT_TRUE(arrived) << arrived.err().describe();
  EXPECT_TRUE(*arrived);
  EXPECT_EQ(s.current(), P::result_ready);
  EXPECT_EQ(s.result_digest(), digest_of(after)) << "checked on arrival: the RoundAck reuses it";
  auto values = s.take_result();
  ASSERT_TRUE(values);
  EXPECT_EQ(**values, after);
  // The next round's change applies to what was taken.
  ASSERT_FALSE(s.contribute(6, 20, some_bytes()));
  arrived = s.update_arrived(6, 3, update_of({1.0f, 1.0f}), digest_of({2.5f, 2.0f}));
  ASSERT_TRUE(arrived && *arrived);
  EXPECT_EQ(**s.take_result(), (std::vector<float>{2.5f, 2.0f}));
}

// Fragment-sized buffers go round instead of being allocated afresh each round (a fresh
// one is faulted in page by page): a result lands in the memory of the theta_global that
// a result before it replaced.
TEST(FragmentSync, AResultReusesTheMemoryOfTheThetaGlobalItReplaced) {
  fragment_sync s;
  std::vector<float> adopted = {1.0f, 2.0f};
  const float* adopted_memory = adopted.data();
  s.adopt(4, 3, std::move(adopted));
  EXPECT_TRUE(s.recycled_buffer().empty()) << "nothing replaced yet";
  ASSERT_FALSE(s.contribute(5, 10, some_bytes()));
  auto arrived = s.update_arrived(5, 3, update_of({0.5f, 0.5f}), digest_of({1.5f, 2.5f}));
  ASSERT_TRUE(arrived && *arrived);
  ASSERT_TRUE(s.take_result());  // round 5 replaces the adopted state, whose memory is kept
  ASSERT_FALSE(s.contribute(6, 20, some_bytes()));
  arrived = s.update_arrived(6, 3, update_of({0.5f, 0.5f}), digest_of({2.0f, 3.0f}));
  ASSERT_TRUE(arrived && *arrived);
  const auto taken = s.take_result();
  ASSERT_TRUE(taken);
  EXPECT_EQ((*taken)->data(), adopted_memory);
  EXPECT_EQ(**taken, (std::vector<float>{2.0f, 3.0f}));
  // A whole result is copied into the spare the worker asks for: round 5's memory now.
  const auto spare = s.recycled_buffer();
  EXPECT_EQ(spare.size(), 2u);
  EXPECT_NE(spare.data(), adopted_memory);
  EXPECT_TRUE(s.recycled_buffer().empty()) << "one spare, handed out once";
}

// A refused low-bit result gives its buffer back: the next one reuses it.
TEST(FragmentSync, ARefusedLowBitResultKeepsItsBufferForTheNext) {
  auto s = awaiting(5);
  const auto refused = s.update_arrived(5, 3, update_of({0.5f, 0.5f}), 42);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.err().code, errc::digest_mismatch);
  const auto kept = s.recycled_buffer();
  EXPECT_EQ(kept.size(), 2u);
}

TEST(FragmentSync, ALowBitResultThatCannotBeAppliedIsTypedAndChangesNothing) {
  const std::vector<float> change = {0.5f, -1.0f};
  const auto good = digest_of({1.5f, 1.0f});
  struct row {
    const char* name;
    std::vector<float> change;
    std::uint64_t digest;
    errc expected;
  };
  const float inf = std::numeric_limits<float>::infinity();
  const row rows[] = {
      {"wrong size", {0.5f}, good, errc::tensor_mismatch},
      {"non-finite sum", {inf, 0.0f}, good, errc::not_finite},
      {"another base (digest differs)", change, good ^ 1u, errc::digest_mismatch},
  };
  for (const auto& r : rows) {
    auto s = awaiting(5);
    auto arrived = s.update_arrived(5, 3, update_of(r.change), r.digest);
    ASSERT_FALSE(arrived) << r.name;
    EXPECT_EQ(arrived.err().code, r.expected) << r.name;
    EXPECT_EQ(s.current(), P::awaiting_result) << r.name;
  }
  auto s = awaiting(5);
  auto other_round = s.update_arrived(4, 3, update_of(change), good);
  ASSERT_TRUE(other_round);
  EXPECT_FALSE(*other_round) << "a result of another round is not ours";
}

TEST(FragmentSync, WithoutAnAdoptedStateALowBitResultIsNotReady) {
  fragment_sync s;
  s.adopt(4, 2, {});  // a state without values (as a ddp worker may hold)
  ASSERT_FALSE(s.contribute(5, 12, some_bytes()));
  auto arrived = s.update_arrived(5, 2, update_of({1.0f}), 0);
  ASSERT_FALSE(arrived);
  EXPECT_EQ(arrived.err().code, errc::not_ready);
}

// Early results: a provisional result is held, not ready, until its round is confirmed
// with the same digest; the confirmation is what makes it the result.
TEST(FragmentSync, AProvisionalResultIsHeldUntilItsRoundIsConfirmed) {
  auto s = awaiting(5);
  const std::vector<float> after = {1.5f, 1.0f};
  EXPECT_FALSE(s.provisional_arrived(4, after, digest_of(after))) << "another round's";
  ASSERT_TRUE(s.provisional_arrived(5, after, digest_of(after)));
  EXPECT_EQ(s.current(), P::awaiting_result) << "held, not applied";
  EXPECT_FALSE(s.has_result());
  auto other = s.confirmed(4, 9, digest_of(after));
  ASSERT_TRUE(other);
  EXPECT_FALSE(*other) << "a confirmation of another round is not ours";
  auto confirmed = s.confirmed(5, 9, digest_of(after));
  ASSERT_TRUE(confirmed) << confirmed.err().describe();
  EXPECT_TRUE(*confirmed);
  EXPECT_EQ(s.current(), P::result_ready);
  EXPECT_EQ(s.epoch(), 9u) << "the confirmation's epoch: the round opened after the commit";
  EXPECT_EQ(**s.take_result(), after);
  auto again = s.confirmed(5, 9, digest_of(after));
  ASSERT_TRUE(again);
  EXPECT_FALSE(*again) << "a duplicate confirmation";
}

// A later provisional result of the same round replaces the held one: a re-placed
// coordinator redoing the round confirms its own.
TEST(FragmentSync, ALaterProvisionalResultOfTheRoundReplacesTheHeldOne) {
  auto s = awaiting(5);
  const std::vector<float> first = {1.5f, 1.0f}, second = {2.5f, 0.0f};
  ASSERT_TRUE(s.provisional_arrived(5, first, digest_of(first)));
  ASSERT_TRUE(s.provisional_arrived(5, second, digest_of(second)));
  auto stale = s.confirmed(5, 3, digest_of(first));
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.err().code, errc::not_ready);
  ASSERT_TRUE(s.confirmed(5, 3, digest_of(second)));
  EXPECT_EQ(**s.take_result(), second);
}

// A confirmation that finds nothing to apply is not_ready (the worker then asks for the
// committed state), and changes nothing; so does one after the held result was dropped.
TEST(FragmentSync, AConfirmationWithoutItsHeldResultIsNotReadyAndChangesNothing) {
  const std::vector<float> after = {1.5f, 1.0f};
  struct row {
    const char* name;
    std::function<void(fragment_sync&)> before;
  };
  const row rows[] = {
      {"nothing held", [](fragment_sync&) {}},
      {"held for another digest", [&](fragment_sync& s) { s.provisional_arrived(5, after, digest_of(after) ^ 1u); }},
      {"dropped by a state request",
       [&](fragment_sync& s) {
         s.provisional_arrived(5, after, digest_of(after));
         s.ask();
         EXPECT_EQ(s.state_arrived(4, 3), fragment_sync::on_state::send_again_and_resume);
       }},
      {"dropped when a re-placed coordinator reopens the round",
       [&](fragment_sync& s) {
         s.provisional_arrived(5, after, digest_of(after));
         EXPECT_EQ(s.state_arrived(4, 3), fragment_sync::on_state::send_again);
       }},
  };
  for (const auto& r : rows) {
    auto s = awaiting(5);
    r.before(s);
    auto confirmed = s.confirmed(5, 3, digest_of(after));
    ASSERT_FALSE(confirmed) << r.name;
    EXPECT_EQ(confirmed.err().code, errc::not_ready) << r.name;
    EXPECT_EQ(s.current(), P::awaiting_result) << r.name;
  }
}

// A provisional low-bit result is checked as a whole one is: what cannot be applied is
// refused at once (typed) and nothing is held.
TEST(FragmentSync, AProvisionalLowBitResultIsCheckedWhenItArrives) {
  auto s = awaiting(5);  // kept theta_global {1, 2}
  const std::vector<float> change = {0.5f, -1.0f}, after = {1.5f, 1.0f};
  auto bad = s.provisional_update_arrived(5, update_of(change), digest_of(after) ^ 1u);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.err().code, errc::digest_mismatch);
  EXPECT_FALSE(s.confirmed(5, 3, digest_of(after))) << "nothing was held";
  auto held = s.provisional_update_arrived(5, update_of(change), digest_of(after));
  ASSERT_TRUE(held && *held);
  EXPECT_EQ(s.current(), P::awaiting_result);
  ASSERT_TRUE(s.confirmed(5, 3, digest_of(after)));
  EXPECT_EQ(s.result_digest(), digest_of(after));
  EXPECT_EQ(**s.take_result(), after);
}

// An fp32 result (theta itself) is not hashed on arrival: it has no checked digest, and the
// worker's RoundAck hashes it.
TEST(FragmentSync, OnlyAResultCheckedOnArrivalCarriesItsDigest) {
  auto s = awaiting(5);
  ASSERT_TRUE(s.result_arrived(5, 3, {1.5f, 1.0f}));
  EXPECT_FALSE(s.result_digest());
  auto early = awaiting(5);
  ASSERT_TRUE(early.provisional_arrived(5, {1.5f, 1.0f}, 77));
  ASSERT_TRUE(early.confirmed(5, 3, 77));
  EXPECT_FALSE(early.result_digest()) << "an fp32 early result's digest was compared, not computed";
}

// A large int8 change is decoded, added, tested and hashed block by block: the result is
// the same as decoding it whole and adding, at every block boundary and in the last,
// partial block.
TEST(FragmentSync, ALargeLowBitResultIsTheSameAsDecodingItWholeAndAdding) {
  const std::size_t n = 3 * 16384 + 1000;
  std::vector<float> theta(n), change(n);
  for (std::size_t i = 0; i < n; ++i) {
    theta[i] = static_cast<float>(i % 97) * 0.01f;
    change[i] = static_cast<float>(static_cast<int>(i % 13) - 6) * 0.001f;
  }
  encoded_values enc;
  ASSERT_FALSE(encode(codec_kind::int8, change.data(), n, 256, enc));
  std::vector<float> decoded(n), expected(n);
  ASSERT_FALSE(decode(enc, decoded.data()));
  for (std::size_t i = 0; i < n; ++i) expected[i] = theta[i] + decoded[i];
  fragment_sync s;
  s.adopt(4, 3, theta);
  ASSERT_FALSE(s.contribute(5, 12, some_bytes()));
  auto arrived = s.update_arrived(5, 3, enc, digest_of(expected));
  ASSERT_TRUE(arrived) << arrived.err().describe();
  EXPECT_EQ(**s.take_result(), expected);
}

}  // namespace
}  // namespace atl
