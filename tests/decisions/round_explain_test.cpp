// What `atollctl explain` says a round waits for: one row per state of
// actors/decisions/round_explain.hpp's diagram.
#include <gtest/gtest.h>

#include "actors/decisions/round_explain.hpp"

namespace atl {
namespace {

explain_input collecting(std::vector<std::string> contributors, double deadline_s = 0, double open_for_s = 0) {
  explain_input in;
  in.coordinator_on = "node/1";
  in.coordinator_node_state = "active";
  round_progress p;
  p.round = 7;
  p.phase = "collecting";
  p.participants = {"worker/1.0", "worker/2.0", "worker/3.0"};
  p.contributors = std::move(contributors);
  p.participant_count = 3;
  p.contributor_count = p.contributors.size();
  p.phase_for_s = 4;
  p.open_for_s = open_for_s;
  in.progress = p;
  in.progress_age_s = 0.5;
  in.facts = {{"worker/1.0", 1, "active", 0.2, 140, false},
              {"worker/2.0", 2, "active", 12.0, 120, false},
              {"worker/3.0", 3, "active", 0.4, 140, false}};
  in.lease_s = 20;
  in.round_deadline_s = deadline_s;
  in.quorum = 2;
  return in;
}

TEST(ExplainRound, EachStateSaysWhatTheRoundWaitsFor) {
  struct row {
    const char* name;
    explain_input in;
    const char* waiting_for;
    std::vector<std::string> missing;
    std::vector<const char*> says;  // in the text
  };
  explain_input unplaced;
  explain_input silent = collecting({});
  silent.progress_age_s = 9;
  silent.coordinator_heartbeat_s = 9;
  explain_input never_reported = collecting({});
  never_reported.progress.reset();
  explain_input ready = collecting({});
  ready.progress->phase = "ready";
  explain_input unseeded = collecting({});
  unseeded.progress->phase = "unseeded";
  explain_input committing = collecting({});
  committing.progress->phase = "committing";
  committing.progress->keepers = {"keeper/0", "keeper/1"};
  committing.progress->acked = {"keeper/0"};
  explain_input adaptive_in = collecting({"worker/1.0", "worker/3.0"});
  adaptive_in.adaptive_close = true;
  explain_input adaptive_short = collecting({"worker/1.0"});
  adaptive_short.adaptive_close = true;
  const std::vector<row> table = {
      {"not placed", unplaced, "placement", {}, {"no coordinator yet"}},
      {"coordinator silent", silent, "coordinator", {}, {"not reported for 9.0 s", "last heartbeat 9.0 s ago"}},
      {"coordinator never reported", never_reported, "coordinator", {}, {"not reported yet"}},
      {"seeding", unseeded, "seed", {}, {"first worker's parameters"}},
      {"too few members", ready, "members", {}, {"at least 2 workers"}},
      {"committing", committing, "keepers", {"keeper/1"}, {"waiting for keeper/1"}},
      {"one stopped participant, no deadline",
       collecting({"worker/1.0", "worker/3.0"}),
       "participants",
       {"worker/2.0"},
       {"2 of 3 contributions", "worker/2.0 (node 2, active, last heartbeat 12 s ago, step 120)",
        "waits for every participant", "node 2 has been silent 12 s, so worker/2.0 goes in 8.0 s"}},
      {"deadline, majority in",
       collecting({"worker/1.0", "worker/3.0"}, 30, 10),
       "participants",
       {"worker/2.0"},
       {"its deadline is in 20 s", "it then closes with the 2 it has"}},
      {"deadline, too few",
       collecting({"worker/1.0"}, 30, 40),
       "participants",
       {"worker/2.0", "worker/3.0"},
       {"its deadline has passed", "only with 2 of 3", "it has 1"}},
      {"adaptive, majority in",
       adaptive_in,
       "participants",
       {"worker/2.0"},
       {"a majority is in (2 of 3)", "once its adaptive grace passes"}},
      {"adaptive, too few",
       adaptive_short,
       "participants",
       {"worker/2.0", "worker/3.0"},
       {"grace starts once 2 of 3", "it has 1", "waits for every participant"}},
      {"nobody contributed yet",
       collecting({}, 30),
       "participants",
       {"worker/1.0", "worker/2.0", "worker/3.0"},
       {"deadline starts with the first contribution"}},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    const auto e = explain_round(r.in);
    EXPECT_EQ(e.waiting_for, r.waiting_for) << e.text;
    std::vector<std::string> missing;
    for (const auto& m : e.missing) missing.push_back(m.worker);
    EXPECT_EQ(missing, r.missing) << e.text;
    for (const char* s : r.says) EXPECT_NE(e.text.find(s), std::string::npos) << "missing '" << s << "' in: " << e.text;
  }
}

TEST(ExplainRound, SinceCountsTheTimeSinceTheCoordinatorReported) {
  const auto e = explain_round(collecting({"worker/1.0"}));
  EXPECT_DOUBLE_EQ(e.since_s, 4.5);  // 4 s in the phase as reported, heard 0.5 s ago
  EXPECT_EQ(e.round, 7u);
  EXPECT_EQ(e.contributed, std::vector<std::string>{"worker/1.0"});
}

// A round of a thousand participants: every missing one is in `missing`, the text names the
// first named_in_text and counts the rest.
TEST(ExplainRound, TheTextNamesTheFirstMissingParticipantsAndCountsTheRest) {
  auto in = collecting({});
  in.progress->participants.clear();
  in.facts.clear();
  for (int i = 0; i < 1000; ++i) {
    const auto w = "worker/" + std::to_string(i) + ".0";
    in.progress->participants.push_back(w);
    in.facts.push_back({w, static_cast<std::uint32_t>(i), "active", 0.1, 10, false});
  }
  in.progress->contributors = {"worker/5.0"};
  in.progress->participant_count = 1000;
  in.progress->contributor_count = 1;
  const auto e = explain_round(in);
  EXPECT_EQ(e.missing.size(), 999u);
  EXPECT_EQ(e.missing[0].node_id, 0u) << "the facts were not found by name";
  EXPECT_NE(e.text.find("worker/10.0 (node 10"), std::string::npos) << e.text;  // the tenth missing
  EXPECT_EQ(e.text.find("worker/11.0"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("and 989 more"), std::string::npos) << e.text;
  EXPECT_LT(e.text.size(), 2000u);
}

// A round of ten thousand: the RoundProgress names at most progress_names of the awaited
// participants and of the contributors, and counts them all; the text says the round's counts.
TEST(ExplainRound, ARoundLargerThanItsNamedListsIsCountedFromItsCounts) {
  auto in = collecting({});
  in.progress->participants.clear();
  in.facts.clear();
  for (std::size_t i = 0; i < progress_names; ++i)
    in.progress->participants.push_back("worker/" + std::to_string(i) + ".0");
  for (std::size_t i = 0; i < progress_names; ++i)
    in.progress->contributors.push_back("worker/" + std::to_string(5000 + i) + ".0");
  in.progress->participant_count = 10000;
  in.progress->contributor_count = 4000;
  const auto e = explain_round(in);
  EXPECT_EQ(e.missing.size(), progress_names) << "the awaited it was told of";
  EXPECT_NE(e.text.find("has 4000 of 10000 contributions"), std::string::npos) << e.text;
  EXPECT_NE(e.text.find("and 5990 more"), std::string::npos) << e.text;  // 6000 awaited, 10 named
}

}  // namespace
}  // namespace atl
