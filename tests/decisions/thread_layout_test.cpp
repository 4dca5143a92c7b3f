#include "runtime/core/thread_layout.hpp"

#include <map>

#include <gtest/gtest.h>

namespace atl {
namespace {

TEST(ThreadLayout, ParsesTxBAndRefusesAnythingElseWithItsText) {
  struct row {
    const char* text;
    bool ok;
    thread_layout want;
  };
  const row rows[] = {
      {"1x2", true, {1, 2}}, {"2x2", true, {2, 2}},     {"16x1", true, {16, 1}}, {"1024x1024", true, {1024, 1024}},
      {"0x2", false, {}},    {"2x0", false, {}},        {"x2", false, {}},       {"2x", false, {}},
      {"2", false, {}},      {"2*2", false, {}},        {"-1x2", false, {}},     {"1x2x3", false, {}},
      {"1025x1", false, {}}, {"99999999x1", false, {}}, {"", false, {}},         {"auto", false, {}},
  };
  for (const auto& r : rows) {
    const auto got = parse_thread_layout(r.text);
    EXPECT_EQ(got.has_value(), r.ok) << r.text;
    if (r.ok && got) {
      EXPECT_EQ(*got, r.want) << r.text;
      EXPECT_EQ(to_string(*got), r.text);
    }
    if (!r.ok && !got) {
      EXPECT_EQ(got.err().code, errc::invalid_config) << r.text;
      EXPECT_NE(got.err().message.find(std::string("\"") + r.text + "\""), std::string::npos) << r.text;
    }
  }
}

TEST(ThreadLayout, CandidatesStayWithinTheBudgetAndAreDistinct) {
  const std::map<int, std::vector<thread_layout>> want = {
      {0, {{1, 1}}},
      {1, {{1, 1}}},
      {2, {{2, 2}, {1, 2}, {2, 1}, {1, 1}}},
      {8, {{8, 8}, {1, 8}, {8, 1}, {1, 1}}},
  };
  for (const auto& [budget, layouts] : want) {
    EXPECT_EQ(candidate_layouts(budget), layouts) << "budget " << budget;
    for (const auto& l : candidate_layouts(budget)) {
      // The BLAS pool runs inside the intra-op thread that calls it: the cores in use at
      // once are the larger of the two.
      EXPECT_LE(std::max(l.torch, l.blas), std::max(1, budget)) << to_string(l);
    }
  }
}

TEST(ThreadLayout, PicksTheFastestOrAFrugalerOneWithinTheTolerance) {
  struct row {
    const char* why;
    std::vector<layout_time> times;
    thread_layout want;
  };
  const row rows[] = {
      {"the fastest, clearly", {{{2, 2}, 0.100}, {{1, 2}, 0.150}, {{2, 1}, 0.140}, {{1, 1}, 0.200}}, {2, 2}},
      {"one intra-op thread, BLAS on both cores",
       {{{2, 2}, 0.214}, {{1, 2}, 0.183}, {{2, 1}, 0.250}, {{1, 1}, 0.260}},
       {1, 2}},
      {"within 3% of the fastest with fewer threads", {{{2, 2}, 0.100}, {{1, 2}, 0.102}}, {1, 2}},
      {"4% slower is not within 3%", {{{2, 2}, 0.100}, {{1, 2}, 0.104}}, {2, 2}},
      {"the frugalest of several within the tolerance",
       {{{2, 2}, 0.100}, {{1, 2}, 0.101}, {{2, 1}, 0.150}, {{1, 1}, 0.1025}},
       {1, 1}},
      {"equal times and threads keep the earlier", {{{1, 2}, 0.100}, {{2, 1}, 0.100}}, {1, 2}},
      {"one candidate", {{{1, 1}, 0.300}}, {1, 1}},
  };
  for (const auto& r : rows) EXPECT_EQ(pick_layout(r.times), r.want) << r.why;
}

// Runs a trial where each layout's step takes `cost(layout)`; returns the layouts the steps ran
// with.
std::vector<thread_layout> run_trial(layout_trial& trial, const std::map<std::string, double>& cost) {
  std::vector<thread_layout> ran;
  std::optional<thread_layout> current;
  for (int step = 0; step < trial.length() + 3; ++step) {
    if (const auto next = trial.before_step()) current = next;
    EXPECT_TRUE(current.has_value());
    ran.push_back(*current);
    trial.after_step(cost.at(to_string(*current)));
  }
  return ran;
}

TEST(ThreadLayout, ATrialWarmsUpTriesEachCandidateInTurnsAndKeepsTheFastest) {
  const trial_plan plan{2, 2, 3};
  layout_trial trial(candidate_layouts(2), plan);
  EXPECT_EQ(trial.length(), 2 + 2 * 4 * 3);
  EXPECT_FALSE(trial.settled());
  const auto ran = run_trial(trial, {{"2x2", 0.20}, {"1x2", 0.10}, {"2x1", 0.30}, {"1x1", 0.40}});
  ASSERT_TRUE(trial.settled());
  EXPECT_EQ(trial.chosen(), (thread_layout{1, 2}));
  const std::vector<std::string> order = {"2x2", "2x2",  // warm-up
                                          "2x2", "2x2", "2x2", "1x2", "1x2", "1x2", "2x1", "2x1",  // pass 1
                                          "2x1", "1x1", "1x1", "1x1",  //
                                          "2x2", "2x2", "2x2", "1x2", "1x2", "1x2", "2x1", "2x1",  // pass 2
                                          "2x1", "1x1", "1x1", "1x1",  //
                                          "1x2", "1x2", "1x2"};  // settled
  ASSERT_EQ(ran.size(), order.size());
  for (std::size_t i = 0; i < ran.size(); ++i) EXPECT_EQ(to_string(ran[i]), order[i]) << "step " << i;
  ASSERT_EQ(trial.times().size(), 4u);
  EXPECT_DOUBLE_EQ(trial.times()[0].seconds_per_step, 0.20);
  EXPECT_DOUBLE_EQ(trial.times()[1].seconds_per_step, 0.10);
  EXPECT_EQ(describe(trial), "1x2 (0.100 s/step; 2x2 0.200, 2x1 0.300, 1x1 0.400)");
}

TEST(ThreadLayout, ATrialTimesNeitherTheWarmUpNorAStintsFirstStep) {
  layout_trial trial({{2, 2}, {1, 2}}, trial_plan{1, 1, 3});
  // warm-up (2x2), then 2x2 x3, then 1x2 x3: the untimed steps are made very slow.
  const double times[] = {9.0, 9.0, 0.20, 0.22, 9.0, 0.30, 0.32};
  for (double t : times) {
    trial.before_step();
    trial.after_step(t);
  }
  ASSERT_TRUE(trial.settled());
  EXPECT_DOUBLE_EQ(trial.times()[0].seconds_per_step, 0.21);
  EXPECT_DOUBLE_EQ(trial.times()[1].seconds_per_step, 0.31);
  EXPECT_EQ(trial.chosen(), (thread_layout{2, 2}));
}

TEST(ThreadLayout, ASingleCandidateIsSettledAtOnceAndAppliedOnce) {
  layout_trial trial(candidate_layouts(1));
  EXPECT_TRUE(trial.settled());
  EXPECT_EQ(trial.length(), 0);
  EXPECT_EQ(trial.before_step(), (std::optional<thread_layout>{thread_layout{1, 1}}));
  trial.after_step(0.1);
  EXPECT_EQ(trial.before_step(), std::nullopt);
  EXPECT_EQ(describe(trial), "1x1");
}

TEST(ThreadLayout, APlanSplitsTheCoresAndTriesLayoutsOnlyForAWorkerAloneInItsProcess) {
  struct row {
    const char* why;
    int cores, local_workers, cpu_workers, process_threads, threads_per_worker;
    const char* layout;
    int budget;
    std::vector<std::string> layouts;
  };
  const row rows[] = {
      {"one CPU worker on 2 cores tries", 2, 1, 1, 0, 0, "auto", 2, {"2x2", "1x2", "2x1", "1x1"}},
      {"two node processes on 2 cores (atoll local): one core each", 2, 1, 1, 1, 0, "auto", 1, {"1x1"}},
      {"--threads is the process's, split among its workers", 16, 2, 2, 8, 0, "auto", 4, {"4x4"}},
      {"run.threads_per_worker is per worker", 16, 1, 1, 0, 4, "auto", 4, {"4x4", "1x4", "4x1", "1x1"}},
      {"--threads wins over run.threads_per_worker", 16, 1, 1, 2, 8, "auto", 2, {"2x2", "1x2", "2x1", "1x1"}},
      {"two CPU workers share the BLAS pool: no trial", 8, 2, 2, 0, 0, "auto", 4, {"4x4"}},
      {"a GPU and a CPU worker: the CPU one tries", 8, 2, 1, 0, 0, "auto", 4, {"4x4", "1x4", "4x1", "1x1"}},
      {"GPU workers only: nothing to try", 8, 1, 0, 0, 0, "auto", 8, {}},
      {"the user's layout wins", 2, 1, 1, 0, 0, "1x2", 2, {"1x2"}},
      {"the user's layout wins for several workers", 8, 2, 2, 0, 0, "2x1", 4, {"2x1"}},
      {"more workers than cores still get one", 2, 4, 4, 0, 0, "auto", 1, {"1x1"}},
  };
  for (const auto& r : rows) {
    thread_plan_input in;
    in.cores = r.cores;
    in.local_workers = r.local_workers;
    in.cpu_workers = r.cpu_workers;
    in.process_threads = r.process_threads;
    in.threads_per_worker = r.threads_per_worker;
    in.layout = r.layout;
    const auto plan = plan_threads(in);
    ASSERT_TRUE(plan) << r.why;
    EXPECT_EQ(plan->budget, r.budget) << r.why;
    std::vector<std::string> got;
    for (const auto& l : plan->layouts) got.push_back(to_string(l));
    EXPECT_EQ(got, r.layouts) << r.why;
  }
  thread_plan_input bad;
  bad.layout = "two";
  const auto refused = plan_threads(bad);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.err().code, errc::invalid_config);
}

}  // namespace
}  // namespace atl
