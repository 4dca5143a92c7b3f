// Protocol tier (tests/support/protocol_fixture.hpp): whole rounds through real workers, a real
// coordinator and a real keeper, and DiLoCo computed directly beside them, bit for bit.
#include "tests/support/protocol_fixture.hpp"

namespace atl {
namespace {

using namespace protocol_testing;

// The codec a coordinator publishes its results in: the contributions' unless
// diloco.result_codec names another; ddp publishes averages (fp32) whatever is set.
TEST(CoordinatorConfig, TheResultCodecIsTheContributionsUnlessOneIsNamed) {
  struct row {
    const char* mode;
    const char* codec;
    const char* result_codec;
    codec_kind expected;
  };
  const row rows[] = {
      {"diloco", "fp32", "same", codec_kind::fp32},     {"diloco", "fp4", "same", codec_kind::fp4},
      {"diloco", "topk32", "same", codec_kind::topk32}, {"diloco", "topk32", "topk16", codec_kind::topk16},
      {"diloco", "int8", "fp32", codec_kind::fp32},     {"ddp", "int8", "topk16", codec_kind::fp32},
  };
  for (const auto& r : rows) {
    run_config run;
    run.mode = r.mode;
    run.codec = r.codec;
    run.result_codec = r.result_codec;
    EXPECT_EQ(coordinator_config_for(run, 0).result_codec, r.expected)
        << r.mode << ", codec " << r.codec << ", result_codec " << r.result_codec;
  }
}

// Four rounds of five steps each.
run_config four_rounds() {
  run_config run;
  run.steps = 20;
  run.sync_every = 5;
  run.log_every = 5;
  run.eval_every = 10;
  return run;
}

TEST_F(ProtocolTest, ARoundWithThreeWorkersLeavesIdenticalDigestsEverywhere) {
  const std::vector<std::string> workers = {"worker/1.0", "worker/2.0", "worker/3.0"};
  spawn_coordinator(3);
  send_membership(1, workers);
  spawn_fake_workers(workers, four_rounds());
  ASSERT_TRUE(obs_.wait_for([&] { return obs_.done.size() == 3 && obs_.digests.size() == 12; }))
      << "done " << obs_.done.size() << ", digests " << obs_.digests.size();

  std::lock_guard<std::mutex> lock(obs_.mu);
  ASSERT_EQ(obs_.rounds.size(), 4u);
  for (std::uint64_t round = 1; round <= 4; ++round) {
    const auto& report = obs_.rounds[round - 1];
    EXPECT_EQ(report.round, round);
    EXPECT_EQ(report.participants, workers);
    // three fp32 contributions of 97 values, each with its envelope
    EXPECT_GT(report.bytes, 3u * 97u * 4u) << "round " << round;
    int acks = 0;
    for (const auto& d : obs_.digests)
      if (d.round == round) {
        EXPECT_EQ(d.digest, report.digest) << d.worker << " round " << round;
        ++acks;
      }
    EXPECT_EQ(acks, 3) << "round " << round;
  }
  EXPECT_NE(obs_.rounds[0].digest, obs_.rounds[3].digest);  // the rounds did change theta
  auto kept = checkpoints_.latest(0);
  ASSERT_TRUE(kept && kept->has_value());
  EXPECT_EQ((*kept)->round, 4u);
  EXPECT_EQ(digest64((*kept)->theta.data(), (*kept)->theta.size() * sizeof(float)), obs_.rounds[3].digest);
  EXPECT_TRUE(obs_.refusals.empty());
}

// Low-bit rounds through real workers, a real coordinator and a real keeper, with either
// round record (diloco.round_record): the keeper's state after the last round is the theta
// every worker acknowledged, and a result record is the int8 result's size (about a
// quarter of the fp32 average an inputs record of three workers logs).
class RecordForms : public ProtocolTest, public ::testing::WithParamInterface<bool> {};

TEST_P(RecordForms, LowBitRoundsLeaveTheKeeperWhereTheWorkersAre) {
  const bool follow = GetParam();
  {
    const std::vector<std::string> workers = {"worker/1.0", "worker/2.0", "worker/3.0"};
    std::vector<std::uint64_t> record_bytes;  // each logged CommitRequest's tensor bytes
    std::mutex mu;
    net_.drop_when([&](const std::string&, const wire::message& msg) {
      if (msg.envelope().isCommitRequest() && msg.envelope().getCommitRequest().getLogged()) {
        std::uint64_t bytes = 0;
        for (const auto& t : msg.tensors()) bytes += t.data.size();
        std::lock_guard<std::mutex> lock(mu);
        record_bytes.push_back(bytes);
        EXPECT_EQ(msg.envelope().getCommitRequest().getPublished(), follow);
      }
      return false;
    });
    customize_coordinator = [&](coordinator_config& cc) {
      cc.result_codec = codec_kind::int8;
      cc.result_chunk = 8;
      cc.state_follows_result = follow;
    };
    spawn_coordinator(3);
    send_membership(1, workers);
    auto run = four_rounds();
    run.codec = "int8";
    run.codec_chunk = 8;
    run.error_feedback = true;
    run.round_record = follow ? "result" : "inputs";
    spawn_fake_workers(workers, run);
    ASSERT_TRUE(obs_.wait_for([&] { return obs_.done.size() == 3 && obs_.digests.size() == 12; }));
    std::lock_guard<std::mutex> lock(obs_.mu);
    ASSERT_EQ(obs_.rounds.size(), 4u);
    for (const auto& d : obs_.digests) EXPECT_EQ(d.digest, obs_.rounds[d.round - 1].digest) << d.worker;
    auto kept = checkpoints_.latest(0);
    ASSERT_TRUE(kept && kept->has_value());
    EXPECT_EQ((*kept)->round, 4u);
    EXPECT_EQ(digest64((*kept)->theta.data(), (*kept)->theta.size() * sizeof(float)), obs_.rounds[3].digest)
        << "the keeper replayed to another theta than the workers'";
    EXPECT_TRUE(obs_.refusals.empty());
    std::lock_guard<std::mutex> bytes_lock(mu);
    ASSERT_EQ(record_bytes.size(), 4u) << "rounds 1 to 4 logged";
    const std::uint64_t n = (*kept)->theta.size();
    const std::uint64_t int8_result = n + (n + 7) / 8 * sizeof(float);
    for (const auto b : record_bytes) {
      if (follow) EXPECT_EQ(b, int8_result) << "a result record is the int8 result";
      else EXPECT_EQ(b, n * sizeof(float)) << "three int8 inputs are more bytes than their fp32 average";
    }
    net_.drop_when(nullptr);
  }
}

INSTANTIATE_TEST_SUITE_P(ResultOrInputs, RecordForms, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "Result" : "Inputs"; });

// Plain DiLoCo computed directly: every worker starts a round from theta_global, takes H
// fake steps, and the outer Nesterov step is applied to the average of the deltas, with
// the same fp32 operations in the same order as the runtime (workers sorted by id).
std::vector<std::vector<float>> direct_diloco(std::uint32_t workers, std::int64_t h, std::int64_t steps,
                                              outer_options outer) {
  std::vector<float> theta;
  {
    fake_replica init(0);
    theta.resize(init.fragment_size(0));
    init.read_fragment(0, theta.data());
  }
  std::vector<float> buf(theta.size(), 0.0f);
  std::vector<std::vector<float>> per_round;
  for (std::int64_t start = 0; start < steps; start += h) {
    std::vector<float> avg(theta.size(), 0.0f);
    const float w = 1.0f / static_cast<float>(workers);
    for (std::uint32_t r = 0; r < workers; ++r) {
      fake_replica local(r);
      local.write_fragment(0, theta.data());
      for (std::int64_t s = start; s < start + h; ++s) local.train_step(s);
      std::vector<float> l(theta.size());
      local.read_fragment(0, l.data());
      for (std::size_t i = 0; i < theta.size(); ++i) avg[i] += w * (theta[i] - l[i]);
    }
    for (std::size_t i = 0; i < theta.size(); ++i) {
      buf[i] = outer.momentum * buf[i] + avg[i];
      theta[i] -= outer.lr * (avg[i] + outer.momentum * buf[i]);
    }
    per_round.push_back(theta);
  }
  return per_round;
}

class DirectComparison : public ProtocolTest {
 protected:
  // Runs `workers` fake workers through the actors; returns the keeper's digest per round.
  std::vector<std::uint64_t> run_actors(std::uint32_t workers, run_config run) {
    std::vector<std::string> ids;
    for (std::uint32_t r = 0; r < workers; ++r) ids.push_back("worker/" + std::to_string(r + 1) + ".0");
    spawn_coordinator(workers, {static_cast<float>(run.outer_lr), static_cast<float>(run.outer_momentum)},
                      std::chrono::milliseconds(0), run.early_results);
    send_membership(1, ids);
    spawn_fake_workers(ids, run);
    const std::size_t rounds = static_cast<std::size_t>(run.steps / run.sync_every);
    EXPECT_TRUE(obs_.wait_for([&] { return obs_.done.size() == workers && obs_.rounds.size() == rounds; }));
    std::lock_guard<std::mutex> lock(obs_.mu);
    std::vector<std::uint64_t> digests;
    for (const auto& r : obs_.rounds) digests.push_back(r.digest);
    return digests;
  }
};

std::uint64_t digest_of(const std::vector<float>& v) { return digest64(v.data(), v.size() * sizeof(float)); }

TEST_F(DirectComparison, HOneWithLrOneAndNoMomentumIsParameterAveragingBitForBit) {
  run_config run;
  run.steps = 6;
  run.sync_every = 1;
  run.outer_lr = 1.0;
  run.outer_momentum = 0.0;
  run.eval_every = 1000;
  ASSERT_TRUE(run.early_results) << "the default: each result provisional, then confirmed";
  const auto got = run_actors(3, run);
  const auto want = direct_diloco(3, 1, 6, {1.0f, 0.0f});
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t r = 0; r < want.size(); ++r) EXPECT_EQ(got[r], digest_of(want[r])) << "round " << r + 1;
  // and that direct computation is the mean of the workers' parameters (up to rounding)
  fake_replica a(0), b(1), c(2);
  for (auto* w : {&a, &b, &c}) {
    w->write_fragment(0, want[4].data());
    w->train_step(5);
  }
  std::vector<float> pa(97), pb(97), pc(97);
  a.read_fragment(0, pa.data());
  b.read_fragment(0, pb.data());
  c.read_fragment(0, pc.data());
  for (std::size_t i = 0; i < 97; ++i) EXPECT_NEAR(want[5][i], (pa[i] + pb[i] + pc[i]) / 3.0f, 1e-6f);
}

TEST_F(DirectComparison, OneFragmentWithoutOverlapIsPlainDiLoCoBitForBit) {
  run_config run;  // P = 1, tau = 0, alpha = 0, fp32: the streaming knobs at their plain values
  run.steps = 20;
  run.sync_every = 5;
  run.fragments = 1;
  run.overlap = 0;
  run.alpha = 0.0;
  run.codec = "fp32";
  run.eval_every = 1000;
  run.early_results = false;  // each result whole, after the commit
  const auto got = run_actors(2, run);
  const auto want = direct_diloco(2, 5, 20, {0.7f, 0.9f});
  ASSERT_EQ(got.size(), 4u);
  for (std::size_t r = 0; r < want.size(); ++r) EXPECT_EQ(got[r], digest_of(want[r])) << "round " << r + 1;
}

}  // namespace
}  // namespace atl
