// The data cursor (actors/decisions/data_cursor.hpp): leases, ties, commits, deaths and
// epochs, each decision a table; then a random schedule checked against a record of its own.
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>

#include "actors/decisions/data_cursor.hpp"

namespace atl::data {
namespace {

data_cursor make_cursor(std::uint64_t units, std::uint64_t chunk, std::uint32_t fragments, std::uint64_t epochs = 0) {
  auto c = data_cursor::make({units, chunk, fragments, epochs});
  EXPECT_TRUE(c) << c.err().describe();
  return std::move(*c);
}

TEST(DataCursor, UnitAtIsAPermutationOfEachEpochSeededByTheRunsSeedAndTheEpoch) {
  for (const std::uint64_t units : {1u, 2u, 3u, 7u, 64u, 1000u, 4097u}) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t p = 0; p < units; ++p) {
      const auto u = unit_at(7, 0, p, units);
      ASSERT_LT(u, units);
      seen.insert(u);
    }
    EXPECT_EQ(seen.size(), units) << units << " units";
  }
  int moved_by_epoch = 0, moved_by_seed = 0;
  for (std::uint64_t p = 0; p < 1000; ++p) {
    moved_by_epoch += unit_at(7, 0, p, 1000) != unit_at(7, 1, p, 1000);
    moved_by_seed += unit_at(7, 0, p, 1000) != unit_at(8, 0, p, 1000);
    ASSERT_EQ(unit_at(7, 3, p, 1000), unit_at(7, 3, p, 1000));
  }
  EXPECT_GT(moved_by_epoch, 900);
  EXPECT_GT(moved_by_seed, 900);
}

TEST(DataCursor, ABadShapeIsRefused) {
  EXPECT_EQ(data_cursor::make({0, 10, 1, 0}).err().code, errc::invalid_config);
  EXPECT_EQ(data_cursor::make({10, 0, 1, 0}).err().code, errc::invalid_config);
  EXPECT_EQ(data_cursor::make({10, 3, 0, 0}).err().code, errc::invalid_config);
  EXPECT_EQ(data_cursor::make({10, 3, max_fragments + 1, 0}).err().code, errc::invalid_config);
  EXPECT_TRUE(data_cursor::make({10, 3, max_fragments, 0}));
}

// Shapes at the edges of 64 bits: a chunk larger than the data is the whole epoch.
TEST(DataCursor, AChunkLargerThanTheDataIsOneChunkAnEpoch) {
  auto c = make_cursor(20, ~std::uint64_t{0} - 6, 1, 2);
  for (std::uint64_t epoch = 0; epoch < 2; ++epoch) {
    const auto got = c.lease("w1");
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == (chunk_id{epoch, 0}));
    EXPECT_TRUE(c.positions_of(*got) == (span{0, 20}));
  }
  EXPECT_FALSE(c.lease("w1"));
  // and units near 2^64: the permutation stays within them
  const std::uint64_t huge = ~std::uint64_t{0} - 3;
  for (std::uint64_t p : {std::uint64_t{0}, std::uint64_t{1}, huge - 1}) EXPECT_LT(unit_at(1, 0, p, huge), huge);
  auto big = make_cursor(huge, std::uint64_t{1} << 62, 1);
  const auto last = chunk_id{0, 3};
  EXPECT_TRUE(big.positions_of(last) == (span{3 * (std::uint64_t{1} << 62), huge}));
}

// (1) Leases: fresh chunks in order, the last one short, the next epoch once this one has
// none left, nothing past the run's epochs; a returned chunk first.
TEST(DataCursor, LeasesHandOutFreshChunksInOrderThenTheNextEpochThenNothing) {
  auto c = make_cursor(10, 4, 1, 2);
  const chunk_id expected[] = {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}};
  for (const auto& e : expected) {
    const auto got = c.lease("w1");
    ASSERT_TRUE(got);
    EXPECT_TRUE(*got == e) << got->epoch << "/" << got->index;
  }
  EXPECT_FALSE(c.lease("w1")) << "two epochs leased: the run's data is handed out";
  EXPECT_TRUE(c.positions_of({0, 2}) == (span{8, 10})) << "the last chunk is short";
}

struct tie_row {
  const char* name;
  std::string worker;
  std::uint32_t fragment;
  chunk_id chunk;
  span positions;
  errc expected;  // errc::none: accepted
};

// (2) Ties: only the holder, within its chunk, once per fragment and position.
TEST(DataCursor, ATieIsTheHoldersWithinItsChunkOncePerFragment) {
  const tie_row rows[] = {
      {"the holder, its first half", "w1", 0, {0, 0}, {0, 2}, errc::none},
      {"another worker", "w2", 0, {0, 0}, {2, 4}, errc::not_participant},
      {"a chunk never leased", "w1", 0, {0, 5}, {20, 21}, errc::not_participant},
      {"past the chunk", "w1", 0, {0, 0}, {2, 5}, errc::bad_data},
      {"empty", "w1", 0, {0, 0}, {2, 2}, errc::bad_data},
      {"a fragment the run has not", "w1", 2, {0, 0}, {2, 4}, errc::unknown_fragment},
      {"positions tied before for the fragment", "w1", 0, {0, 0}, {1, 3}, errc::duplicate},
      {"the same positions for the other fragment", "w1", 1, {0, 0}, {0, 2}, errc::none},
  };
  auto c = make_cursor(8, 4, 2);
  ASSERT_TRUE(c.lease("w1"));
  for (const auto& r : rows) {
    const auto got = c.tie(r.worker, r.fragment, 1, r.chunk, r.positions);
    EXPECT_EQ(got.code, r.expected) << r.name << ": " << got.message;
  }
}

struct commit_row {
  const char* name;
  // the tie: worker w1's contribution to round `tied_round` of fragment 0 covers the whole chunk
  std::uint64_t tied_round;
  bool tie_after_commit;  // the tie reaches the cursor after the commits below
  // the commits of fragment 0: round, taken, late
  std::vector<std::tuple<std::uint64_t, std::vector<std::string>, std::vector<std::string>>> commits;
  chunk_state expected;  // with w1 gone after the commits
  std::vector<consumption> ledger;
};

// (3) Commits, with P = 1 and the worker gone at the end (so the chunk settles).
TEST(DataCursor, ACommitConsumesWhatItTookAndTheNextMayTakeItLate) {
  const std::vector<std::string> w1 = {"w1"}, none = {}, w2 = {"w2"};
  const commit_row rows[] = {
      {"taken on time", 3, false, {{3, w1, none}}, chunk_state::consumed, {{0, 3, {0, 4}}}},
      {"taken on time, tie arriving after the commit",
       3,
       true,
       {{3, w1, none}},
       chunk_state::consumed,
       {{0, 3, {0, 4}}}},
      {"left out, taken late by the next round",
       3,
       false,
       {{3, w2, none}, {4, w2, w1}},
       chunk_state::consumed,
       {{0, 4, {0, 4}}}},
      {"left out, taken late, tie after both commits",
       3,
       true,
       {{3, w2, none}, {4, w2, w1}},
       chunk_state::consumed,
       {{0, 4, {0, 4}}}},
      {"left out and not taken late: lost, so returned",
       3,
       false,
       {{3, w2, none}, {4, w2, none}},
       chunk_state::returned,
       {}},
      {"a round passed over: lost, so returned", 3, false, {{4, w2, none}, {5, w2, none}}, chunk_state::returned, {}},
      {"not committed yet when the worker goes: pending, still leased",
       5,
       false,
       {{4, w2, none}},
       chunk_state::leased,
       {}},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto c = make_cursor(4, 4, 1);
    const auto chunk = c.lease("w1");
    ASSERT_TRUE(chunk);
    if (!r.tie_after_commit) {
      ASSERT_FALSE(c.tie("w1", 0, r.tied_round, *chunk, {0, 4}));
    }
    for (const auto& [round, taken, late] : r.commits) c.committed(0, round, 0, taken, late);
    if (r.tie_after_commit) {
      ASSERT_FALSE(c.tie("w1", 0, r.tied_round, *chunk, {0, 4}));
    }
    c.worker_gone("w1", 0);
    EXPECT_EQ(c.state_of(*chunk), r.expected) << to_string(*c.state_of(*chunk));
    EXPECT_EQ(c.ledger_of(*chunk), r.ledger);
  }
}

// (4) A gone worker's chunk waits until every fragment committed a round opened at the
// epoch it went in or later: until then a report still on its way (reports go one at a
// time, and wait out a head restart) may carry its work, and a chunk leased again would
// be learned twice (the seeded fault tier found it). Its tie of fragment 0 round 1 is
// there; w1 goes at epoch 5.
TEST(DataCursor, AGoneWorkersChunkWaitsForARoundOfEveryFragmentOpenedAfterItWent) {
  struct row {
    const char* name;
    std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, bool>>
        commits;  // fragment, round, epoch, w1 taken
    chunk_state expected;
  };
  const row rows[] = {
      {"no commit since", {}, chunk_state::leased},
      {"fragment 0 took its work at epoch 5, fragment 1 has not committed", {{0, 1, 5, true}}, chunk_state::leased},
      {"both fragments committed, but rounds opened before it went (reports lagging)",
       {{0, 1, 4, true}, {1, 1, 4, false}},
       chunk_state::leased},
      {"both committed rounds of epoch 5: settled, fragment 0 learned what it took",
       {{0, 1, 5, true}, {1, 1, 5, false}},
       chunk_state::partial},
      {"both committed at epoch 6, its tie lost (round 2 did not take it late): back to the pool",
       {{0, 1, 6, false}, {0, 2, 6, false}, {1, 1, 6, false}},
       chunk_state::returned},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto c = make_cursor(8, 4, 2);
    const auto chunk = c.lease("w1");
    ASSERT_TRUE(chunk);
    ASSERT_FALSE(c.tie("w1", 0, 1, *chunk, {0, 4}));
    c.worker_gone("w1", 5);
    // The waiting survives a restart from the stored snapshot.
    auto restored = data_cursor::restore(c.snapshot());
    ASSERT_TRUE(restored) << restored.err().describe();
    for (const auto& [fragment, round, epoch, taken] : r.commits)
      restored->committed(fragment, round, epoch, taken ? std::vector<std::string>{"w1"} : std::vector<std::string>{},
                          {});
    EXPECT_EQ(restored->state_of(*chunk), r.expected) << to_string(*restored->state_of(*chunk));
    if (r.expected != chunk_state::leased) continue;
    EXPECT_FALSE(restored->lease("w2") == chunk) << "not leased again";
    if (r.commits.empty()) continue;  // its tie still waits for fragment 0's round 1
    restored->run_finished();
    EXPECT_NE(restored->state_of(*chunk), chunk_state::leased) << "the run's end settles it";
  }
}

struct settle_row {
  const char* name;
  bool fragment0_taken, fragment1_taken;  // each fragment's tie of the whole chunk
  bool fragment1_tied;  // false: the worker died before contributing fragment 1
  bool gone;
  chunk_state expected;
};

// (4), (5) With P = 2: a chunk settles once every fragment tied every position (or its
// worker is gone) and no tie is pending.
TEST(DataCursor, AChunkSettlesConsumedPartialOrReturned) {
  const settle_row rows[] = {
      {"both fragments took it", true, true, true, false, chunk_state::consumed},
      {"both took it, the worker gone after", true, true, true, true, chunk_state::consumed},
      {"fragment 1 lost it, the worker alive", true, false, true, false, chunk_state::partial},
      {"died between the fragments' contributions", true, false, false, true, chunk_state::partial},
      {"fragment 1 not contributed yet, worker alive", true, false, false, false, chunk_state::leased},
      {"neither took it", false, false, true, false, chunk_state::returned},
      {"died before contributing", false, false, false, true, chunk_state::returned},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto c = make_cursor(6, 6, 2);
    const auto chunk = c.lease("w1");
    ASSERT_TRUE(chunk);
    ASSERT_FALSE(c.tie("w1", 0, 1, *chunk, {0, 6}));
    if (r.fragment1_tied) {
      ASSERT_FALSE(c.tie("w1", 1, 1, *chunk, {0, 6}));
    }
    const std::vector<std::string> w1 = {"w1"}, none = {};
    c.committed(0, 1, 0, r.fragment0_taken ? w1 : none, none);
    c.committed(0, 2, 0, none, none);  // a left-out tie is lost once the next round passes
    if (r.fragment1_tied) {
      c.committed(1, 1, 0, r.fragment1_taken ? w1 : none, none);
      c.committed(1, 2, 0, none, none);
    }
    if (r.gone) c.worker_gone("w1", 0);
    EXPECT_EQ(c.state_of(*chunk), r.expected) << to_string(*c.state_of(*chunk));
  }
}

struct reopen_row {
  const char* name;
  bool fragment0_committed;  // fragment 0's round 1 took w1's contribution before w1 was gone
  bool leased_again;  // the settled chunk went to w2 before w1's late tie came
  const char* late_tier;  // who the late tie is from
  errc expected;
  chunk_state after;  // once fragment 1's round 1 took w1
};

// (6) A tie of a gone worker, come late (a RoundReport sent again after a head restart):
// the chunk its death settled reopens while no one leased it since.
TEST(DataCursor, ALateTieOfAGoneWorkerReopensItsSettledChunk) {
  const reopen_row rows[] = {
      {"returned, not leased again", false, false, "w1", errc::none, chunk_state::partial},
      {"partial, not leased again", true, false, "w1", errc::none, chunk_state::consumed},
      {"returned and leased again: learned by w2 now", false, true, "w1", errc::not_participant, chunk_state::leased},
      {"from another worker", false, false, "w2", errc::not_participant, chunk_state::returned},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto c = make_cursor(4, 4, 2);
    const auto chunk = c.lease("w1");
    ASSERT_TRUE(chunk);
    const std::vector<std::string> w1 = {"w1"}, none = {};
    if (r.fragment0_committed) {
      ASSERT_FALSE(c.tie("w1", 0, 1, *chunk, {0, 4}));
      c.committed(0, 1, 0, w1, none);
    }
    c.worker_gone("w1", 0);
    EXPECT_EQ(c.state_of(*chunk), r.fragment0_committed ? chunk_state::partial : chunk_state::returned);
    if (r.leased_again) {
      ASSERT_TRUE(c.lease("w2"));
    }
    const auto before = c.snapshot();
    EXPECT_EQ(c.tie(r.late_tier, 1, 1, *chunk, {0, 4}).code, r.expected);
    if (r.expected != errc::none) {
      EXPECT_EQ(c.snapshot().chunks.size(), before.chunks.size());
      EXPECT_EQ(c.state_of(*chunk), r.after) << "a refused tie changes nothing";
      continue;
    }
    EXPECT_EQ(c.state_of(*chunk), chunk_state::leased) << "reopened until the tie is resolved";
    EXPECT_EQ(c.progress_now().returned, 0u);
    c.committed(1, 1, 0, w1, none);
    EXPECT_EQ(c.state_of(*chunk), r.after) << to_string(*c.state_of(*chunk));
    EXPECT_EQ(c.last_committed(1), std::optional<std::uint64_t>{1});
    const auto next = c.lease("w3");
    ASSERT_TRUE(next);
    EXPECT_FALSE(*next == *chunk) << "a reopened chunk is out of the pool";
  }
}

TEST(DataCursor, AReturnedChunkIsLeasedFirstAndTheEpochEndsWhenEveryChunkSettles) {
  auto c = make_cursor(8, 4, 1, 1);
  const auto a = c.lease("w1"), b = c.lease("w2");
  ASSERT_TRUE(a && b);
  EXPECT_FALSE(c.lease("w3")) << "the one epoch is leased";
  c.worker_gone("w1", 0);  // nothing tied: a goes back
  EXPECT_EQ(c.state_of(*a), chunk_state::returned);
  auto p = c.progress_now();
  EXPECT_EQ(p.returned, 4u);
  EXPECT_EQ(p.in_flight, 4u);
  const auto again = c.lease("w3");
  ASSERT_TRUE(again);
  EXPECT_TRUE(*again == *a);
  ASSERT_FALSE(c.tie("w3", 0, 1, *a, {0, 4}));
  ASSERT_FALSE(c.tie("w2", 0, 1, *b, {4, 8}));
  EXPECT_FALSE(c.progress_now().finished);
  c.committed(0, 1, 0, {"w2", "w3"}, {});
  p = c.progress_now();
  EXPECT_EQ(p.epoch, 1u);
  EXPECT_TRUE(p.finished);
  EXPECT_EQ(p.in_flight, 0u);
  EXPECT_EQ(c.ledger_of(*a), (std::vector<consumption>{{0, 1, {0, 4}}}));
}

// A snapshot that does not hold together is refused, as a damaged store would be.
TEST(DataCursor, ADamagedSnapshotIsRefused) {
  auto c = make_cursor(8, 4, 2);
  const auto a = c.lease("w1"), b = c.lease("w2");
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(c.tie("w1", 0, 1, *a, {0, 2}));
  c.worker_gone("w2", 0);  // b goes back
  const auto good = c.snapshot();
  ASSERT_TRUE(data_cursor::restore(good));
  struct row {
    const char* name;
    std::function<void(cursor_snapshot&)> damage;
  };
  const row rows[] = {
      {"no units", [](cursor_snapshot& s) { s.config.units = 0; }},
      {"a chunk past its epoch", [](cursor_snapshot& s) { s.chunks[0].id.index = 9; }},
      {"a fragment missing", [](cursor_snapshot& s) { s.chunks[0].tied.pop_back(); }},
      {"a span outside its chunk",
       [](cursor_snapshot& s) {
         s.chunks[0].tied[0] = {{2, 6}};
       }},
      {"an empty span",
       [](cursor_snapshot& s) {
         s.chunks[0].consumed[1] = {{3, 3}};
       }},
      {"a tie to a chunk not leased",
       [](cursor_snapshot& s) {
         s.ties[0].chunk = {0, 1};
       }},
      {"a returned chunk named twice", [](cursor_snapshot& s) { s.returned.push_back(s.returned[0]); }},
      {"a returned chunk left out of the pool", [](cursor_snapshot& s) { s.returned.clear(); }},
      {"a returned chunk that is leased",
       [](cursor_snapshot& s) {
         s.returned = {{0, 0}};
       }},
      {"the next fresh chunk past the epoch", [](cursor_snapshot& s) { s.next_fresh = 3; }},
      {"a commit of a fragment the run has not",
       [](cursor_snapshot& s) {
         s.recent.push_back({5, 1, {}, {}});
       }},
  };
  for (const auto& r : rows) {
    auto snap = good;
    r.damage(snap);
    const auto restored = data_cursor::restore(snap);
    ASSERT_FALSE(restored) << r.name;
    EXPECT_TRUE(restored.err().code == errc::bad_data || restored.err().code == errc::invalid_config)
        << r.name << ": " << restored.err().describe();
  }
}

// A random schedule of leases, contributions (each fragment's tie of the positions trained
// since that fragment's last contribution), commits that take some contributors and some
// of the last round's left-out work late, deaths, and head restarts (the cursor restored
// from its snapshot), checked against a record the test keeps itself: each fragment
// learns each position at most once; a consumed chunk was learned by every fragment at
// every position; the ledger is the record.
TEST(DataCursor, ARandomScheduleLearnsNoPositionTwiceAndTheLedgerIsTheRecord) {
  using piece = std::pair<chunk_id, span>;
  std::map<chunk_state, int> states_seen;  // over every seed: the schedules reach each ending
  int releases = 0;  // leases of a returned chunk
  int restores = 0;  // cursors restored from a snapshot mid-schedule
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    const std::uint32_t fragments = 1 + static_cast<std::uint32_t>(rng() % 3);
    const std::uint64_t units = 20 + rng() % 40, chunk = 2 + rng() % 6;
    auto c = make_cursor(units, chunk, fragments, 1);
    struct trainer {
      std::optional<chunk_id> chunk;
      std::uint64_t next = 0;  // the next position of its chunk it trains
      std::vector<std::vector<piece>> untied;  // per fragment: trained since its last contribution
    };
    std::map<std::string, trainer> alive;
    std::vector<std::uint64_t> round(fragments, 1);
    std::vector<std::map<std::string, std::vector<piece>>> open(fragments);  // this round's contributions
    std::vector<std::map<std::string, std::vector<piece>>> left_out(fragments);  // the last round's
    std::map<std::pair<chunk_id, std::uint32_t>, std::vector<consumption>> record;  // (chunk, fragment)
    std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, int> learned;  // (fragment, epoch, position)
    const auto learn = [&](std::uint32_t f, std::uint64_t committed_in, const std::vector<piece>& pieces) {
      for (const auto& [id, s] : pieces) {
        record[{id, f}].push_back({f, committed_in, s});
        for (auto pos = s.begin; pos < s.end; ++pos) ++learned[{f, id.epoch, pos}];
      }
    };
    const auto commit = [&](std::uint32_t f, bool take_anyone) {
      std::vector<std::string> taken, late;
      for (const auto& [w, pieces] : open[f]) {
        if (take_anyone && rng() % 4 != 0) {
          taken.push_back(w);
          learn(f, round[f], pieces);
        }
      }
      for (const auto& [w, pieces] : left_out[f]) {
        if (take_anyone && rng() % 2 == 0) {
          late.push_back(w);
          learn(f, round[f], pieces);
        }
      }
      c.committed(f, round[f], 0, taken, late);
      left_out[f].clear();
      for (auto& [w, pieces] : open[f])
        if (std::find(taken.begin(), taken.end(), w) == taken.end()) left_out[f][w] = pieces;
      open[f].clear();
      ++round[f];
    };
    int names = 0;
    for (int event = 0; event < 4000 && !c.progress_now().finished; ++event) {
      const auto roll = rng() % 100;
      if (alive.size() < 2 || roll < 2) {  // a worker joins
        trainer t;
        t.untied.resize(fragments);
        alive.emplace("w" + std::to_string(++names), t);
      } else if (roll < 5) {  // one dies: what it trained and did not contribute is lost
        auto it = std::next(alive.begin(), static_cast<long>(rng() % alive.size()));
        c.worker_gone(it->first, 0);
        alive.erase(it);
      } else if (roll < 75) {  // one trains a step of one position
        auto& [name, t] = *std::next(alive.begin(), static_cast<long>(rng() % alive.size()));
        if (!t.chunk || t.next == c.positions_of(*t.chunk).end) {
          const auto returned = c.progress_now().returned;
          t.chunk = c.lease(name);
          if (!t.chunk) continue;
          releases += c.progress_now().returned < returned;
          t.next = c.positions_of(*t.chunk).begin;
        }
        for (auto& per : t.untied) per.push_back({*t.chunk, {t.next, t.next + 1}});
        ++t.next;
      } else if (roll < 92) {  // one contributes a fragment, once a round
        auto& [name, t] = *std::next(alive.begin(), static_cast<long>(rng() % alive.size()));
        const auto f = static_cast<std::uint32_t>(rng() % fragments);
        if (open[f].count(name) || t.untied[f].empty()) continue;
        for (const auto& [id, s] : t.untied[f]) ASSERT_FALSE(c.tie(name, f, round[f], id, s));
        open[f][name] = std::move(t.untied[f]);
        t.untied[f].clear();
      } else if (roll < 98) {
        commit(static_cast<std::uint32_t>(rng() % fragments), true);
      } else {  // the head restarts: the cursor goes on from what was persisted
        auto restored = data_cursor::restore(c.snapshot());
        ASSERT_TRUE(restored) << restored.err().describe();
        c = std::move(*restored);
        ++restores;
      }
    }
    for (auto& [name, t] : alive) c.worker_gone(name, 0);
    for (std::uint32_t f = 0; f < fragments; ++f) {  // what is still open settles
      commit(f, true);
      commit(f, false);
    }
    for (const auto& [key, times] : learned) ASSERT_EQ(times, 1) << "a position learned twice";
    const auto p = c.progress_now();
    EXPECT_EQ(p.in_flight, 0u) << "every worker gone, every tie resolved: every chunk settled";
    for (std::uint64_t index = 0; index * chunk < units; ++index) {
      const chunk_id id{0, index};
      const auto state = c.state_of(id);
      if (!state) continue;  // never leased
      std::vector<consumption> expected;
      for (std::uint32_t f = 0; f < fragments; ++f) {
        const auto& r = record[{id, f}];
        expected.insert(expected.end(), r.begin(), r.end());
        if (*state != chunk_state::consumed) continue;
        for (auto pos = c.positions_of(id).begin; pos < c.positions_of(id).end; ++pos)
          ASSERT_EQ((learned[{f, 0, pos}]), 1) << "chunk " << index << " consumed, position " << pos;
      }
      ++states_seen[*state];
      if (*state == chunk_state::returned) {
        EXPECT_TRUE(c.ledger_of(id).empty());
        continue;  // its record is of an earlier lease that consumed nothing
      }
      auto ledger = c.ledger_of(id);
      const auto by = [](const consumption& a, const consumption& b) {
        return std::tie(a.fragment, a.positions.begin, a.round) < std::tie(b.fragment, b.positions.begin, b.round);
      };
      std::sort(ledger.begin(), ledger.end(), by);
      std::sort(expected.begin(), expected.end(), by);
      EXPECT_EQ(ledger, expected) << "chunk " << index << " (" << to_string(*state) << ")";
    }
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(states_seen[chunk_state::consumed], 1000);
  EXPECT_GT(states_seen[chunk_state::partial], 100);
  EXPECT_GT(releases, 100) << "returned chunks are leased again (so few end returned)";
  EXPECT_GT(restores, 1000);
}

}  // namespace
}  // namespace atl::data

namespace atl::data {
namespace {

// What a snapshot says of each chunk and of the waiting ties, compared field by field.
void expect_same_cursor(const cursor_snapshot& a, const cursor_snapshot& b) {
  ASSERT_EQ(a.chunks.size(), b.chunks.size());
  for (std::size_t i = 0; i < a.chunks.size(); ++i) {
    const auto &x = a.chunks[i], &y = b.chunks[i];
    EXPECT_TRUE(x.id == y.id) << "chunk " << i;
    EXPECT_EQ(x.state, y.state) << "chunk " << i;
    EXPECT_EQ(x.holder, y.holder) << "chunk " << i;
    EXPECT_EQ(x.tied, y.tied) << "chunk " << i;
    EXPECT_EQ(x.consumed, y.consumed) << "chunk " << i;
    EXPECT_EQ(x.ledger, y.ledger) << "chunk " << i;
  }
  EXPECT_EQ(a.returned, b.returned);
  ASSERT_EQ(a.ties.size(), b.ties.size());
  for (std::size_t i = 0; i < a.ties.size(); ++i) {
    EXPECT_EQ(a.ties[i].worker, b.ties[i].worker);
    EXPECT_TRUE(a.ties[i].chunk == b.ties[i].chunk);
    EXPECT_EQ(a.ties[i].positions, b.ties[i].positions);
  }
}

// A contribution's pieces are tied all or none: the first refused piece undoes the ones
// before it, a reopened chunk included, and the cursor is as it was.
TEST(DataCursor, AContributionsPiecesAreTiedAllOrNone) {
  struct row {
    const char* name;
    bool first_chunk_returned;  // w1 went, and its chunk was returned: the first piece reopens it
    std::vector<std::pair<int, span>> pieces;  // (which of w1's two chunks, positions)
    errc expected;
  };
  const std::vector<row> rows = {
      {"two pieces of two chunks", false, {{0, {0, 4}}, {1, {4, 8}}}, errc::none},
      {"two pieces of one chunk", false, {{0, {0, 2}}, {0, {2, 4}}}, errc::none},
      {"the second overlaps the first", false, {{0, {0, 3}}, {0, {2, 4}}}, errc::duplicate},
      {"the second outside its chunk", false, {{0, {0, 4}}, {1, {0, 4}}}, errc::bad_data},
      {"the second of a chunk leased to another worker", false, {{0, {0, 4}}, {2, {8, 12}}}, errc::not_participant},
      {"a reopening piece, then a refused one", true, {{0, {0, 4}}, {0, {3, 4}}}, errc::duplicate},
  };
  for (const auto& r : rows) {
    SCOPED_TRACE(r.name);
    auto c = make_cursor(12, 4, 1);
    std::vector<chunk_id> chunks;
    for (const char* w : {"w1", "w1", "w2"}) {
      const auto leased = c.lease(w);
      ASSERT_TRUE(leased);
      chunks.push_back(*leased);
    }
    if (r.first_chunk_returned) {
      c.worker_gone("w1", 0);
      ASSERT_EQ(c.state_of(chunks[0]), chunk_state::returned);
    }
    std::vector<piece> pieces;
    for (const auto& [which, positions] : r.pieces) pieces.push_back({chunks[which], positions});
    const auto before = c.snapshot();
    EXPECT_EQ(c.tie_all("w1", 0, 1, pieces).code, r.expected);
    if (r.expected == errc::none) {
      EXPECT_EQ(c.snapshot().ties.size(), before.ties.size() + pieces.size());
      continue;
    }
    expect_same_cursor(c.snapshot(), before);
    if (r.first_chunk_returned) {
      EXPECT_EQ(c.lease("w3"), std::optional<chunk_id>{chunks[0]}) << "not returned again";
    }
  }
}

}  // namespace
}  // namespace atl::data
