// Protocol tier (tests/support/protocol_fixture.hpp): rounds reduced in slices (diloco.shards = 2)
// through real workers, two real coordinators (coord/0 and coord/1, one per slice of the
// one fragment) and a real keeper: a slice's keeper lost while the other slice's results
// reach the workers first, and a slice's host lost mid-round. After each, every worker,
// every report and the keeper agree on every slice's rounds.
#include "tests/support/protocol_fixture.hpp"

namespace atl {
namespace {

using namespace protocol_testing;

// A keeper stand-in that acknowledges the rounds before `hold_from` at once and holds the
// rest unanswered (its CommitRequests are recorded in `obs`).
caf::behavior holding_keeper(caf::event_based_actor*, transport* net, std::string id, std::string cluster,
                             std::uint64_t hold_from, observations* obs) {
  auto mail = std::make_shared<mailer>(*net, std::move(id), std::move(cluster));
  return {
      [=](const wire::message_ptr& msg) {
        const auto env = msg->envelope();
        if (!env.isCommitRequest()) return;
        const auto req = env.getCommitRequest();
        {
          std::lock_guard<std::mutex> lock(obs->mu);
          obs->received.push_back(msg);
        }
        if (req.getRound() >= hold_from) return;
        wire::outgoing out;
        auto ack = out.envelope.initCommitAck();
        ack.setFragment(req.getFragment());
        ack.setRound(req.getRound());
        ack.setOk(true);
        mail->send(msg->sender(), msg->epoch(), out);
      },
  };
}

class SlicedRoundTest : public ProtocolTest {
 protected:
  static constexpr std::size_t values = 2 * 16384;  // two slices of one outer-step block each
  static constexpr std::uint64_t rounds = 4;
  const std::vector<std::string> workers = {"worker/1.0", "worker/2.0"};

  ~SlicedRoundTest() override { stop_actors(); }  // before keeper1_obs_ goes

  void spawn_slice(std::uint32_t unit) {
    coordinator_config cc;
    cc.fragment = unit;
    cc.min_workers = workers.size();
    cc.outer = {0.7f, 0.9f};
    dir_.add(coordinator_id(unit), sys_.spawn(coordinator_actor, static_cast<transport*>(&net_), cluster_.get(), cc));
  }
  void membership(std::uint64_t epoch, std::uint32_t unit, const std::vector<std::string>& keepers) {
    send_membership(epoch, workers, 0, keepers, coordinator_id(unit));
  }
  void spawn_workers() {
    run_config run;
    run.steps = static_cast<std::int64_t>(rounds) * 5;
    run.sync_every = 5;
    run.shards = 2;
    run.outer_lr = 0.7;
    run.outer_momentum = 0.9;
    spawn_fake_workers(workers, run, [](const run_config&, const replica_spec& s) -> std::unique_ptr<replica> {
      return std::make_unique<fake_replica>(s.rank, 1, nullptr, values);
    });
  }
  void place_holding_keeper(std::uint64_t hold_from) {
    dir_.add("keeper/1", sys_.spawn(holding_keeper, static_cast<transport*>(&net_), std::string("keeper/1"),
                                    cluster_.get(), hold_from, &keeper1_obs_));
  }
  bool finished() {
    std::size_t reports = 0;
    for (const auto& r : obs_.rounds) reports += r.round == rounds;
    return obs_.done.size() == workers.size() && reports == 2;
  }
  // Times `what` was sent to `receiver` ("coord/1 contribution"), by the transport's record.
  std::size_t sent(const std::string& what) {
    const auto all = net_.receivers();
    return static_cast<std::size_t>(std::count(all.begin(), all.end(), what));
  }
  bool acked(std::uint32_t unit, std::uint64_t round, const std::string& worker) {
    return std::any_of(obs_.digests.begin(), obs_.digests.end(), [&](const observed_ack& a) {
      return a.fragment == unit && a.round == round && a.worker == worker;
    });
  }

  // Every slice's every round: each report's digest is every worker's, the last one's is
  // the keeper's, and no round of a slice was reported twice with two digests.
  void expect_everyone_agrees() {
    std::lock_guard<std::mutex> lock(obs_.mu);
    for (std::uint32_t unit = 0; unit < 2; ++unit) {
      std::map<std::uint64_t, std::uint64_t> reported;  // round -> digest
      for (const auto& r : obs_.rounds) {
        if (r.fragment != unit) continue;
        const auto [it, first] = reported.emplace(r.round, r.digest);
        EXPECT_TRUE(first || it->second == r.digest) << "unit " << unit << " round " << r.round << " reported twice";
      }
      ASSERT_EQ(reported.size(), rounds) << "unit " << unit;
      for (const auto& a : obs_.digests) {
        if (a.fragment != unit) continue;
        EXPECT_EQ(a.digest, reported.at(a.round)) << a.worker << " unit " << unit << " round " << a.round;
      }
      for (std::uint64_t round = 1; round <= rounds; ++round)
        for (const auto& w : workers) EXPECT_TRUE(acked(unit, round, w)) << w << " unit " << unit << " round " << round;
      auto kept = checkpoints_.latest(unit);
      ASSERT_TRUE(kept && kept->has_value()) << "unit " << unit;
      EXPECT_EQ((*kept)->round, rounds) << "unit " << unit;
      EXPECT_EQ(digest64((*kept)->theta.data(), (*kept)->theta.size() * sizeof(float)), reported.at(rounds))
          << "unit " << unit;
    }
    EXPECT_TRUE(obs_.refusals.empty());
  }

  observations keeper1_obs_;
};

// Slice 0 commits to keeper/0 and keeper/1, which holds round 1 unanswered; slice 1 to
// keeper/0 alone. Slice 1's result of round 1 reaches the workers first: they hold it, and
// train on only once slice 0's comes (no contribution to round 2 before). keeper/1 is then
// lost (a Membership without it): slice 0's round 1 completes on keeper/0, and both slices
// run to the end, every copy agreeing.
TEST_F(SlicedRoundTest, ASlicesKeeperLostWhileTheOtherSlicesResultsCameFirst) {
  place_holding_keeper(1);
  spawn_slice(0);
  spawn_slice(1);
  membership(1, 0, {"keeper/0", "keeper/1"});
  membership(1, 1, {"keeper/0"});
  spawn_workers();
  ASSERT_TRUE(obs_.wait_for([&] { return acked(1, 1, workers[0]) && acked(1, 1, workers[1]); }))
      << "slice 1's round 1 did not reach both workers";
  EXPECT_FALSE(acked(0, 1, workers[0]) || acked(0, 1, workers[1])) << "slice 0's round 1 was released unkept";
  EXPECT_EQ(sent("coord/0 contribution"), 2u) << "a worker trained on before slice 0's result";
  EXPECT_EQ(sent("coord/1 contribution"), 2u) << "a worker trained on before slice 0's result";

  membership(2, 0, {"keeper/0"});  // keeper/1's node died
  membership(2, 1, {"keeper/0"});
  ASSERT_TRUE(obs_.wait_for([&] { return finished(); }));
  expect_everyone_agrees();
  std::lock_guard<std::mutex> lock(keeper1_obs_.mu);
  ASSERT_FALSE(keeper1_obs_.received.empty());
  EXPECT_EQ(keeper1_obs_.received.back()->envelope().getCommitRequest().getRound(), 1u)
      << "keeper/1 was asked to keep rounds after it was lost";
}

// Slice 1's coordinator dies while its round 2 commits (its CommitRequests are lost on
// the way). Placed again, it resumes from the keeper at round 1, the workers send slice 1
// of round 2 again, and the round completes with the same inputs; slice 0 goes on
// undisturbed (each of its rounds reported once).
TEST_F(SlicedRoundTest, ASliceHostLostMidRoundIsPlacedAgainAndOnlyThatSliceRedoesItsRound) {
  spawn_slice(0);
  spawn_slice(1);
  membership(1, 0, {"keeper/0"});
  membership(1, 1, {"keeper/0"});
  net_.drop_when([](const std::string&, const wire::message& m) {
    return m.sender() == "coord/1" && m.envelope().isCommitRequest() && m.envelope().getCommitRequest().getRound() == 2;
  });
  spawn_workers();
  ASSERT_TRUE(obs_.wait_for([&] { return sent("keeper/0 commit_request dropped") >= 1; }));
  EXPECT_FALSE(acked(1, 2, workers[0]) || acked(1, 2, workers[1])) << "slice 1's round 2 released unkept";

  caf::anon_send_exit(dir_.find("coord/1"), caf::exit_reason::kill);  // its node died
  dir_.remove("coord/1");
  sched_.run();
  net_.drop_when(nullptr);
  const auto contributions_before = sent("coord/1 contribution");
  spawn_slice(1);  // placed again
  membership(2, 0, {"keeper/0"});
  membership(2, 1, {"keeper/0"});
  ASSERT_TRUE(obs_.wait_for([&] { return finished(); }));
  expect_everyone_agrees();
  EXPECT_GE(sent("coord/1 contribution"), contributions_before + 2 * (rounds - 2) + 2)
      << "the workers did not send slice 1 of round 2 again";
  std::lock_guard<std::mutex> lock(obs_.mu);
  std::map<std::uint64_t, int> slice0_reports;
  for (const auto& r : obs_.rounds)
    if (r.fragment == 0) slice0_reports[r.round]++;
  for (std::uint64_t round = 1; round <= rounds; ++round)
    EXPECT_EQ(slice0_reports[round], 1) << "slice 0's round " << round << " was disturbed";
}

}  // namespace
}  // namespace atl
