// Protocol tier (tests/support/protocol_fixture.hpp): the coordinator, driven by a test that speaks
// as its workers, registry and keepers (FencingTest): fencing, held requests, deadlines,
// early results, its loads, and the order it releases results in.
#include "tests/support/protocol_fixture.hpp"
#include "tests/support/throw_point.hpp"

namespace atl {
namespace {

using namespace protocol_testing;

TEST_F(FencingTest, ContributionsForTheWrongRoundOrEpochAreRefusedWithTypedErrors) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(4, {"worker/x"});
  {
    wire::outgoing req;
    req.envelope.initStateRequest().setFragment(0);
    std::vector<float> init = {1.0f, 2.0f, 3.0f};
    req.tensors.push_back(wire::tensor::from_floats(init.data(), init.size()));
    as_worker_.send("coord/0", 0, req);
  }
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& state = worker_obs_.received[0];
    ASSERT_TRUE(state->envelope().isFragmentState());
    EXPECT_EQ(state->envelope().getFragmentState().getRound(), 0u);
    EXPECT_EQ(state->epoch(), 4u);
  }

  contribute(4, 2, {0, 0, 0});  // a round that is not open
  contribute(3, 1, {0, 0, 0});  // an older epoch
  contribute(4, 1, {NAN, 0, 0});  // not finite
  contribute(4, 1, {0, 0});  // wrong size
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.refusals.size() == 4; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    EXPECT_EQ(worker_obs_.refusals,
              (std::vector<errc>{errc::wrong_round, errc::stale_epoch, errc::not_finite, errc::tensor_mismatch}));
  }
  EXPECT_EQ(received_count(), 1u);  // nothing was released by refused contributions

  contribute(4, 1, {0.5f, -1.0f, 0.0f});  // valid: lr 1, no momentum -> theta - delta
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& result = worker_obs_.received[1];
    ASSERT_TRUE(result->envelope().isRoundResult());
    EXPECT_EQ(result->envelope().getRoundResult().getRound(), 1u);
    EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{0.5f, 3.0f, 3.0f}));
  }
  contribute(4, 1, {0, 0, 0});  // round 1 is closed now
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.refusals.size() == 5; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  EXPECT_EQ(worker_obs_.refusals.back(), errc::wrong_round);
}

// A member that is not a participant of the open round (a joiner admitted mid-round) gets
// the committed state: it may have another fragment's round to train for. A repeat is
// answered again (the state may have been lost). Once its contribution to this round is
// refused, its requests are held (StateHeld) until a round that includes it opens: no
// refusal loop.
TEST_F(FencingTest, AMemberOutsideTheOpenRoundGetsItsBaseUntilRefusedThenWaitsForARoundThatIncludesIt) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // round 1 is open

  observations joiner_obs;
  dir_.add("worker/y", sys_.spawn(probe_actor, &joiner_obs));
  mailer as_joiner(net_, "worker/y", "cluster-test");
  send_membership(2, {"worker/x", "worker/y"});
  request_state_as(as_joiner);
  request_state_as(as_joiner);  // a repeat: the first answer may have been lost
  ASSERT_TRUE(joiner_obs.wait_for([&] { return joiner_obs.received.size() == 2; })) << "no state outside the round";
  {
    std::lock_guard<std::mutex> lock(joiner_obs.mu);
    for (const auto& state : joiner_obs.received) {
      ASSERT_TRUE(state->envelope().isFragmentState());
      EXPECT_EQ(state->envelope().getFragmentState().getRound(), 0u);
    }
  }
  contribute_as(as_joiner, 1, 1, {9.0f, 9.0f, 9.0f});
  ASSERT_TRUE(joiner_obs.wait_for([&] { return joiner_obs.refusals.size() == 1; }));
  request_state_as(as_joiner);
  ASSERT_TRUE(joiner_obs.wait_for([&] { return joiner_obs.held.size() == 1; })) << "no StateHeld";
  {
    std::lock_guard<std::mutex> lock(joiner_obs.mu);
    EXPECT_EQ(joiner_obs.refusals[0], errc::not_participant);
    EXPECT_TRUE(joiner_obs.held[0]) << "the fragment is seeded";
    EXPECT_EQ(joiner_obs.received.size(), 2u) << "answered after its refusal while round 1 cannot take it";
  }

  contribute(1, 1, {0.5f, 0.0f, 0.0f});  // round 1 closes; round 2 opens with both
  ASSERT_TRUE(joiner_obs.wait_for([&] { return joiner_obs.received.size() == 3; }));
  std::lock_guard<std::mutex> lock(joiner_obs.mu);
  const auto& state = joiner_obs.received[2];
  ASSERT_TRUE(state->envelope().isFragmentState());
  EXPECT_EQ(state->envelope().getFragmentState().getRound(), 1u);
  EXPECT_EQ(state->epoch(), 2u);  // round 2's epoch: the joiner contributes in it
  EXPECT_EQ(state->tensors()[0].to_floats(), (std::vector<float>{0.5f, 2.0f, 3.0f}));  // y's 9s did not count
}

// A worker that holds the committed state's bytes (its StateRequest names their digest) is
// sent only the header: count, digest and the keepers, should its values have changed
// since. One that names another digest, or none, gets the values.
TEST_F(FencingTest, AStateRequestNamingTheCommittedDigestIsAnsweredWithoutTheValues) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  const std::vector<float> theta{1.0f, 2.0f, 3.0f};
  const auto digest = digest64(theta.data(), theta.size() * sizeof(float));
  request_state_with(theta);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // seeded, round 1 open
  request_state_as(as_worker_, {}, digest);
  request_state_as(as_worker_, {}, digest + 1);
  request_state_as(as_worker_);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 4; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  const auto header = worker_obs_.received[1];
  ASSERT_TRUE(header->envelope().isFragmentState());
  EXPECT_TRUE(header->tensors().empty());
  const auto fs = header->envelope().getFragmentState();
  EXPECT_EQ(fs.getRound(), 0u);
  EXPECT_EQ(fs.getCount(), 3u);
  EXPECT_EQ(fs.getDigest(), digest);
  ASSERT_EQ(fs.getKeepers().size(), 1u);
  EXPECT_EQ(std::string(fs.getKeepers()[0].cStr()), "keeper/0");
  for (std::size_t i : {2, 3}) {
    ASSERT_EQ(worker_obs_.received[i]->tensors().size(), 1u) << "request " << i;
    EXPECT_EQ(worker_obs_.received[i]->tensors()[0].to_floats(), theta);
  }
}

// A held StateRequest is answered StateHeld, whose seedHeld tells rank 0 whether its
// repeats must still carry its parameters: yes while the coordinator is not seeded and
// holds none, no once it holds some (or is seeded).
TEST_F(FencingTest, AHeldStateRequestSaysWhetherTheCoordinatorHoldsASeed) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  request_state_as(as_worker_);  // no parameters: nothing to seed from
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.held.size() == 1; }));
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.held.size() == 2; }));
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // seeded, round 1 open
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  EXPECT_EQ(worker_obs_.held, (std::vector<bool>{false, true}));
  EXPECT_TRUE(worker_obs_.received[0]->envelope().isFragmentState());
}

// A contribution for the round about to open (it waits for a quorum) is held, not refused;
// when the round opens in a newer epoch it is refused as stale_epoch with that epoch, and
// the same contribution sent again in it counts.
TEST_F(FencingTest, AContributionBeforeItsRoundOpensIsHeldThenFencedByEpoch) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  send_membership(2, {"worker/x"}, 2);  // round 2 will need two participants
  contribute(1, 1, {1.0f, 0.0f, 0.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));  // round 1's result

  contribute(1, 2, {1.0f, 0.0f, 0.0f});  // early: round 2 is not open
  settle(std::chrono::milliseconds(100));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    EXPECT_TRUE(worker_obs_.refusals.empty()) << "refused before its round opened";
  }
  send_membership(3, {"worker/x"}, 1);  // round 2 opens in epoch 3
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.refusals.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    EXPECT_EQ(worker_obs_.refusals[0], errc::stale_epoch);
    EXPECT_EQ(worker_obs_.received.size(), 2u);
  }
  contribute(3, 2, {1.0f, 0.0f, 0.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  const auto& result = worker_obs_.received[2];
  ASSERT_TRUE(result->envelope().isRoundResult());
  EXPECT_EQ(result->envelope().getRoundResult().getRound(), 2u);
  EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{-1.0f, 2.0f, 3.0f}));
}

// A participant that sends the round after the open one started past it (a warm joiner that
// adopted another slice of the fragment a round ahead) and will never send it: the open round
// goes on without it rather than waiting for ever, and its contribution is held for the
// next round, which takes it.
TEST_F(FencingTest, AParticipantThatSkippedTheOpenRoundIsDroppedFromItAndCountsInTheNext) {
  observations y_obs;
  ASSERT_TRUE(open_round_one_with_x_and_y(y_obs));
  mailer as_y(net_, "worker/y", "cluster-test");

  contribute(1, 2, {1.0f, 0.0f, 0.0f});  // x skipped round 1
  contribute_as(as_y, 1, 1, {0.0f, 1.0f, 0.0f});
  ASSERT_TRUE(y_obs.wait_for([&] { return !y_obs.received.empty(); }));
  {
    std::lock_guard<std::mutex> lock(y_obs.mu);
    const auto& result = y_obs.received[0];
    ASSERT_TRUE(result->envelope().isRoundResult());
    EXPECT_EQ(result->envelope().getRoundResult().getRound(), 1u);
    EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{1.0f, 1.0f, 3.0f}));  // y's alone
  }
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    EXPECT_TRUE(worker_obs_.refusals.empty()) << "x's round 2 was refused instead of held";
    EXPECT_EQ(worker_obs_.received.size(), 1u) << "x got a result of the round it skipped";
  }
  contribute_as(as_y, 1, 2, {0.0f, 1.0f, 0.0f});  // round 2 takes x's held contribution and y's
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  const auto& result = worker_obs_.received[1];
  ASSERT_TRUE(result->envelope().isRoundResult());
  EXPECT_EQ(result->envelope().getRoundResult().getRound(), 2u);
  EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{0.5f, 0.5f, 3.0f}));
}

// A participant can say it starts past the open round before it trains at all: a joiner
// whose other slice of the fragment was a round ahead asks for this slice's state naming
// the open round as skipped. The round goes on without it (it need not wait for the
// joiner's next contribution, which may itself wait on this round through another
// fragment); the request and its repeats are held, then answered with the round it
// skipped once a round that includes it opens. The round's only participant that says
// the same is answered in it: a round of nobody would never close.
TEST_F(FencingTest, AParticipantThatSaysItStartsPastTheOpenRoundIsLeftOutAndGetsThatRoundsState) {
  observations y_obs;
  ASSERT_TRUE(open_round_one_with_x_and_y(y_obs));
  mailer as_y(net_, "worker/y", "cluster-test");

  request_state_as(as_y, {}, 0, /*skips_round=*/1);
  request_state_as(as_y, {}, 0, /*skips_round=*/1);  // a repeat: held as well
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.held.size() == 2; })) << "y's requests were not held";
  contribute(1, 1, {1.0f, 0.0f, 0.0f});  // round 1 completes with x alone
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; })) << "round 1 waited for y";
  ASSERT_TRUE(y_obs.wait_for([&] { return !y_obs.received.empty(); })) << "y's held request not answered";
  {
    std::lock_guard<std::mutex> lock(y_obs.mu);
    ASSERT_EQ(y_obs.received.size(), 1u) << "answered more than once";
    const auto& state = y_obs.received[0];
    ASSERT_TRUE(state->envelope().isFragmentState());
    EXPECT_EQ(state->envelope().getFragmentState().getRound(), 1u) << "not the round it skipped";
    EXPECT_EQ(state->tensors()[0].to_floats(), (std::vector<float>{0.0f, 2.0f, 3.0f}));
  }
  contribute_as(as_y, 1, 2, {0.0f, 1.0f, 0.0f});  // round 2 includes y
  contribute(1, 2, {0.0f, 1.0f, 0.0f});
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.received.size() == 2; })) << "y is not a participant of round 2";

  // Now y alone is left in the fleet: the only participant of round 3 is answered in it.
  send_membership(2, {"worker/y"});
  request_state_as(as_y, {}, 0, /*skips_round=*/3);
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.received.size() == 3; })) << "the sole participant was held";
  std::lock_guard<std::mutex> lock(y_obs.mu);
  ASSERT_TRUE(y_obs.received[2]->envelope().isFragmentState());
  EXPECT_EQ(y_obs.received[2]->envelope().getFragmentState().getRound(), 2u);
}

// A participant past two rounds (it names round 2 while round 1 is open) is left out of
// round 1 at once, held, and left out of round 2 too when that round opens with it (the
// held requests are decided again as each round opens); it gets round 2's state once
// round 3 opens.
TEST_F(FencingTest, ARequestThatSkipsALaterRoundIsLeftOutOfEachRoundUpToIt) {
  observations y_obs;
  ASSERT_TRUE(open_round_one_with_x_and_y(y_obs));
  mailer as_y(net_, "worker/y", "cluster-test");

  request_state_as(as_y, {}, 0, /*skips_round=*/2);
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.held.size() == 1; })) << "y's request was not held";
  contribute(1, 1, {1.0f, 0.0f, 0.0f});  // round 1 completes with x alone
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; })) << "round 1 waited for y";
  {
    std::lock_guard<std::mutex> lock(y_obs.mu);
    EXPECT_TRUE(y_obs.received.empty()) << "answered with round 1, older than the round 2 it skips";
  }
  contribute(1, 2, {1.0f, 0.0f, 0.0f});  // round 2 completes with x alone too
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; })) << "round 2 waited for y";
  ASSERT_TRUE(y_obs.wait_for([&] { return !y_obs.received.empty(); })) << "y's held request not answered";
  std::lock_guard<std::mutex> lock(y_obs.mu);
  ASSERT_EQ(y_obs.received.size(), 1u);
  ASSERT_TRUE(y_obs.received[0]->envelope().isFragmentState());
  EXPECT_EQ(y_obs.received[0]->envelope().getFragmentState().getRound(), 2u);
  EXPECT_EQ(y_obs.received[0]->tensors()[0].to_floats(), (std::vector<float>{-1.0f, 2.0f, 3.0f}));
}

// A Membership delta the coordinator cannot apply (the one before it was lost) leaves its
// members as they were, and it asks the registry for the whole Membership; a delta from the
// base it holds applies. Whether worker/y is a member shows in how its StateRequest is met:
// held (StateHeld) while it is not, answered with the state once it is.
TEST_F(FencingTest, AMembershipDeltaWithAGapAsksForTheWholeAndKeepsTheMembers) {
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // round 1 is open
  observations y_obs;
  dir_.add("worker/y", sys_.spawn(probe_actor, &y_obs));
  mailer as_y(net_, "worker/y", "cluster-test");
  const auto asked = [&] {
    const auto all = net_.receivers();
    return std::count(all.begin(), all.end(), "registry membership_request");
  };
  const auto asked_before = asked();
  const auto send_delta = [&](const membership_view& from, const membership_view& to) {
    mailer as_registry(net_, "registry", cluster_.get());
    wire::outgoing out;
    write_membership(diff_membership(from, to), out.envelope.initMembership());
    as_registry.send("coord/0", to.epoch, out);
  };
  const membership_view e1{1, {"worker/x"}, 0, {}, {}}, e2{2, {"worker/x", "worker/w"}, 0, {}, {}};
  const membership_view e3{3, {"worker/w", "worker/x", "worker/y"}, 0, {}, {}};
  send_delta(e2, e3);  // the delta to epoch 2 was lost
  settle(std::chrono::milliseconds(10));
  EXPECT_EQ(asked(), asked_before + 1);
  request_state_as(as_y);
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.held.size() == 1; })) << "worker/y became a member by a gap";
  send_delta(e1, e2);
  send_delta(e2, e3);
  settle(std::chrono::milliseconds(10));
  request_state_as(as_y);
  ASSERT_TRUE(y_obs.wait_for([&] { return y_obs.received.size() == 1; }));
  std::lock_guard<std::mutex> lock(y_obs.mu);
  EXPECT_TRUE(y_obs.received[0]->envelope().isFragmentState());
  EXPECT_EQ(asked(), asked_before + 1) << "asked again for a delta it could apply";
}

// A worker that is slow but alive holds a round up to diloco.round_deadline_ms; then the
// round closes with the contributions it has, if they are a quorum and a majority of its
// participants. The latecomer is refused as wrong_round (it resyncs).
TEST_F(FencingTest, ARoundPastItsDeadlineClosesWithAMajorityOfItsParticipants) {
  spawn_coordinator(2, {1.0f, 0.0f}, std::chrono::milliseconds(150));
  send_membership(1, {"worker/x", "worker/y", "worker/z"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  observations y_obs, z_obs;
  dir_.add("worker/y", sys_.spawn(probe_actor, &y_obs));
  dir_.add("worker/z", sys_.spawn(probe_actor, &z_obs));
  mailer as_y(net_, "worker/y", "cluster-test"), as_z(net_, "worker/z", "cluster-test");

  contribute(1, 1, {0.5f, 0.0f, 0.0f});
  wire::outgoing from_y;
  auto c = from_y.envelope.initContribution();
  c.setFragment(0);
  c.setRound(1);
  c.setWeight(1.0f);
  const std::vector<float> delta_y = {1.5f, 0.0f, 0.0f};
  put_contribution(c,
                   encoded_values{codec_kind::fp32,
                                  3,
                                  0,
                                  std::vector<std::uint8_t>(reinterpret_cast<const std::uint8_t*>(delta_y.data()),
                                                            reinterpret_cast<const std::uint8_t*>(delta_y.data()) + 12),
                                  {}},
                   from_y);
  as_y.send("coord/0", 1, from_y);
  // Two of three, a quorum (2) and a majority: after the deadline, theta - mean(x, y).
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& result = worker_obs_.received[1];
    ASSERT_TRUE(result->envelope().isRoundResult());
    EXPECT_EQ(result->envelope().getRoundResult().getRound(), 1u);
    EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{0.0f, 2.0f, 3.0f}));
  }
  wire::outgoing late;
  auto lc = late.envelope.initContribution();
  lc.setFragment(0);
  lc.setRound(1);
  lc.setWeight(1.0f);
  put_contribution(lc, encoded_values{codec_kind::fp32, 3, 0, std::vector<std::uint8_t>(12, 0), {}}, late);
  as_z.send("coord/0", 1, late);
  ASSERT_TRUE(z_obs.wait_for([&] { return z_obs.refusals.size() == 1; }));
  std::lock_guard<std::mutex> lock(z_obs.mu);
  EXPECT_EQ(z_obs.refusals[0], errc::wrong_round);
}

// diloco.round_close = adaptive: once a majority of four is in, the round waits out the
// grace (median arrival + 3 MADs: 100 + 3 x 100 ms from the first) and closes without the
// fourth; its contribution is refused wrong_round (it resyncs).
class AdaptiveCloseTest : public FencingTest {
 protected:
  // keep_late_work: diloco.late_work = keep (LateWorkTest); data: run.data_cursor.
  explicit AdaptiveCloseTest(bool keep_late_work = false, bool data = false) {
    customize_coordinator = [keep_late_work, data](coordinator_config& cc) {
      cc.adaptive_close = true;
      cc.grace_k = 3;
      cc.grace_min = std::chrono::milliseconds(50);
      cc.keep_late_work = keep_late_work;
      cc.reports_carry_data = data;
    };
    spawn_coordinator(2, {1.0f, 0.0f});
    send_membership(1, {"worker/w", "worker/x", "worker/y", "worker/z"});
    request_state_with({1.0f, 2.0f, 3.0f});
    for (auto* name : {"worker/w", "worker/y", "worker/z"}) {
      auto& obs = others_[name];
      dir_.add(name, sys_.spawn(probe_actor, &obs));
      as_[name] = std::make_unique<mailer>(net_, name, "cluster-test");
    }
  }
  ~AdaptiveCloseTest() override { stop_actors(); }  // before the observations die
  void contribute_from(const char* name, const std::vector<float>& delta, std::uint64_t round = 1,
                       const std::vector<data::piece>& pieces = {}) {
    contribute_as(*as_.at(name), 1, round, delta, 1.0f, pieces);
  }
  std::map<std::string, observations> others_;
  std::map<std::string, std::unique_ptr<mailer>> as_;
};

TEST_F(AdaptiveCloseTest, AMajorityRoundClosesOnceItsGracePassedWithoutTheStraggler) {
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {0.25f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(100));
  contribute_from("worker/y", {0.5f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(100));
  contribute_from("worker/z", {0.75f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(150));  // 350 ms after the first: within the grace
  EXPECT_EQ(received_count(), 1u) << "closed before its grace passed";
  settle(std::chrono::milliseconds(100));  // 450 ms: past it
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& result = worker_obs_.received[1];
    ASSERT_TRUE(result->envelope().isRoundResult());
    EXPECT_EQ(result->tensors()[0].to_floats(), (std::vector<float>{0.5f, 2.0f, 3.0f}));  // theta - mean of 3
  }
  contribute_from("worker/w", {0.0f, 0.0f, 0.0f});
  auto& late = others_["worker/w"];
  ASSERT_TRUE(late.wait_for([&] { return late.refusals.size() == 1; }));
  std::lock_guard<std::mutex> lock(late.mu);
  EXPECT_EQ(late.refusals[0], errc::wrong_round);
}

TEST_F(AdaptiveCloseTest, AContributionWithinTheGraceIsWaitedFor) {
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {0.25f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(100));
  contribute_from("worker/y", {0.25f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(100));
  contribute_from("worker/z", {0.25f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(100));  // 300 ms: the grace ends at 400
  EXPECT_EQ(received_count(), 1u);
  contribute_from("worker/w", {1.25f, 0.0f, 0.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  EXPECT_EQ(worker_obs_.received[1]->tensors()[0].to_floats(), (std::vector<float>{0.5f, 2.0f, 3.0f}));  // all four
}

// With fewer than a majority in, the grace never starts: two of four wait however long.
TEST_F(AdaptiveCloseTest, TwoOfFourWaitWithoutADeadline) {
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {0.4f, 0.0f, 0.0f});
  contribute_from("worker/y", {0.4f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(5000));
  EXPECT_EQ(received_count(), 1u) << "two of four closed a round";
}

// diloco.late_work = keep: the straggler's round-1 work, sent while round 2 collects, is
// folded into round 2 at half its weight, and the straggler gets round 1's result (whole)
// to merge instead of a refusal. Round 2 still waits for its own contribution. The
// head's keeper replays round 2 from its record (late input included) and acknowledges it
// only if it reaches the coordinator's digest: the release proves the replay.
class LateWorkTest : public AdaptiveCloseTest {
 protected:
  LateWorkTest() : AdaptiveCloseTest(true) {}
};

TEST_F(LateWorkTest, AStragglersWorkIsFoldedIntoTheNextRoundAndItGetsTheResultItMissed) {
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {0.5f, 0.0f, 0.0f});
  contribute_from("worker/y", {0.5f, 0.0f, 0.0f});
  contribute_from("worker/z", {0.5f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(300));  // past the grace: round 1 closes without worker/w
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));

  contribute_as(*as_.at("worker/w"), 1, 1, {2.5f, 0.0f, 0.0f}, 2.0f);  // round 1, late, weight 2
  auto& w = others_["worker/w"];
  ASSERT_TRUE(w.wait_for([&] { return w.received.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(w.mu);
    EXPECT_TRUE(w.refusals.empty());
    ASSERT_TRUE(w.received[0]->envelope().isRoundResult());
    EXPECT_EQ(w.received[0]->envelope().getRoundResult().getRound(), 1u);
    EXPECT_EQ(w.received[0]->tensors()[0].to_floats(), (std::vector<float>{0.5f, 2.0f, 3.0f}));  // round 1's
  }
  // Round 2: every participant, and the late input at 2 x 0.5: theta - 2.5 x 1 / 5.
  contribute(1, 2, {0.0f, 0.0f, 0.0f});
  contribute_from("worker/y", {0.0f, 0.0f, 0.0f}, 2);
  contribute_from("worker/z", {0.0f, 0.0f, 0.0f}, 2);
  settle(std::chrono::milliseconds(30));  // within the grace (the floor, 50 ms)
  EXPECT_EQ(received_count(), 2u) << "round 2 closed without worker/w's own contribution";
  contribute_from("worker/w", {0.0f, 0.0f, 0.0f}, 2);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  EXPECT_EQ(worker_obs_.received[2]->envelope().getRoundResult().getRound(), 2u);
  EXPECT_EQ(worker_obs_.received[2]->tensors()[0].to_floats(), (std::vector<float>{0.0f, 2.0f, 3.0f}));
}

// run.data_cursor: each RoundReport carries the data pieces of the contributions its round
// took (the late one's with the round it was sent for), and goes to the registry one at a
// time, oldest first, until a RoundReportAck covers it (sent again after
// report_resend_after without one).
class DataReportTest : public AdaptiveCloseTest {
 protected:
  DataReportTest() : AdaptiveCloseTest(true, true) {}
  // The RoundReports the registry's probe received.
  std::vector<observed_round> reports() {
    std::lock_guard<std::mutex> lock(obs_.mu);
    return obs_.rounds;
  }
  void ack_report(std::uint64_t round) {
    mailer as_registry(net_, "registry", cluster_.get());
    wire::outgoing out;
    auto ack = out.envelope.initRoundReportAck();
    ack.setFragment(0);
    ack.setRound(round);
    as_registry.send("coord/0", 1, out);
  }
};

TEST_F(DataReportTest, ReportsCarryTheirRoundsDataAndWaitForTheRegistrysAck) {
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  const auto piece = [](std::uint64_t index) {
    return std::vector<data::piece>{{{0, index}, {index * 4, index * 4 + 4}}};
  };
  contribute_as(as_worker_, 1, 1, {0.5f, 0.0f, 0.0f}, 1.0f, piece(0));
  contribute_from("worker/y", {0.5f, 0.0f, 0.0f}, 1, piece(1));
  contribute_from("worker/z", {0.5f, 0.0f, 0.0f}, 1, piece(2));
  settle(std::chrono::milliseconds(300));  // past the grace: round 1 closes without worker/w
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  auto seen = reports();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].round, 1u);
  using tie = std::pair<std::uint64_t, std::uint64_t>;  // contributed to, chunk index
  EXPECT_EQ(seen[0].ties,
            (std::map<std::string, tie>{{"worker/x", {1, 0}}, {"worker/y", {1, 1}}, {"worker/z", {1, 2}}}));

  contribute_from("worker/w", {2.5f, 0.0f, 0.0f}, 1, piece(3));  // round 1's, late: folded into round 2
  contribute_as(as_worker_, 1, 2, {0.0f, 0.0f, 0.0f}, 1.0f, piece(4));
  for (const auto* name : {"worker/y", "worker/z", "worker/w"}) contribute_from(name, {0.0f, 0.0f, 0.0f}, 2);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; }));
  EXPECT_EQ(reports().size(), 1u) << "round 2's report went before round 1's was acknowledged";

  ack_report(1);
  settle(std::chrono::milliseconds(10));
  seen = reports();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].round, 2u);
  EXPECT_EQ(seen[1].ties, (std::map<std::string, tie>{{"worker/x", {2, 4}}, {"worker/w", {1, 3}}}))
      << "the late work's data with the round it was sent for; no pieces, no tie";
  settle(report_resend_after + std::chrono::milliseconds(1100));
  seen = reports();
  ASSERT_EQ(seen.size(), 3u) << "unacknowledged: sent again";
  EXPECT_EQ(seen[2].round, 2u);
  ack_report(2);
  settle(report_resend_after + std::chrono::milliseconds(1100));
  EXPECT_EQ(reports().size(), 3u) << "acknowledged: not again";
}

// One contribution of three is not a majority: the deadline passes and the round waits.
TEST_F(FencingTest, ARoundPastItsDeadlineWithoutAMajorityKeepsWaiting) {
  spawn_coordinator(1, {1.0f, 0.0f}, std::chrono::milliseconds(50));
  send_membership(1, {"worker/x", "worker/y", "worker/z"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {0.5f, 0.0f, 0.0f});
  settle(std::chrono::milliseconds(300));  // six deadlines
  EXPECT_EQ(received_count(), 1u) << "a round closed with one participant of three";
}

// Keeper replication: with a replica in the Membership, a round (the seed included) is
// released only once both keepers acknowledged it; the head's alone is not enough.
TEST_F(FencingTest, ARoundIsReleasedOnlyWhenEveryKeeperAcknowledgedIt) {
  place_replica_probe();
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"}, 0, {"keeper/0", "keeper/1"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 1; })) << "the replica got no commit of round 0";
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 0u) << "round 0 released with only the head's keeper";
  ack_as_replica(0);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));

  contribute(1, 1, {0.5f, 0.0f, 0.0f});
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 2; }));
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 1u) << "round 1 released with only the head's keeper";
  ack_as_replica(1);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  EXPECT_TRUE(worker_obs_.received[1]->envelope().isRoundResult());
}

// With result records (diloco.round_record = result), a round whose change is not finite
// publishes theta itself, which no record replays: every keeper is sent the round's full
// state (theta and momentum, no residual: the coordinator's own), not a record, and holds it.
TEST_F(FencingTest, ARoundThatPublishesThetaItselfCommitsItsFullStateWithResultRecords) {
  std::vector<std::pair<bool, std::size_t>> commits;  // (logged, tensors) of each CommitRequest of round 1
  std::mutex mu;
  net_.drop_when([&](const std::string&, const wire::message& msg) {
    if (msg.envelope().isCommitRequest() && msg.envelope().getCommitRequest().getRound() == 1) {
      std::lock_guard<std::mutex> lock(mu);
      commits.emplace_back(msg.envelope().getCommitRequest().getLogged(), msg.tensors().size());
    }
    return false;
  });
  customize_coordinator = [](coordinator_config& cc) {
    cc.result_codec = codec_kind::int8;
    cc.result_chunk = 8;
    cc.state_follows_result = true;
  };
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  const float big = std::numeric_limits<float>::max();
  request_state_with({big, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  contribute(1, 1, {-big, 0.5f, 0.5f});  // theta - lr * delta overflows: the change is not finite
  ASSERT_TRUE(obs_.wait_for([&] { return !obs_.rounds.empty(); }));
  {
    std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(commits.size(), 1u);
    EXPECT_FALSE(commits[0].first) << "a record cannot replay a round that published theta";
    EXPECT_EQ(commits[0].second, 2u) << "theta and momentum";
  }
  auto kept = checkpoints_.latest(0);
  ASSERT_TRUE(kept && kept->has_value());
  EXPECT_EQ((*kept)->round, 1u);
  EXPECT_EQ(digest64((*kept)->theta.data(), (*kept)->theta.size() * sizeof(float)), obs_.rounds[0].digest);
  net_.drop_when(nullptr);
}

// Early results: a round's result reaches its contributor while the keepers write it
// (once every keeper said it has the whole request), marked provisional; the confirmation
// (no tensors, the same round and digest) follows only once every keeper acknowledged the
// round, so nobody applies a round that is not durable.
TEST_F(FencingTest, EarlyResultsAreConfirmedOnlyWhenEveryKeeperAcknowledgedTheRound) {
  place_replica_probe();
  spawn_coordinator(1, {1.0f, 0.0f}, std::chrono::milliseconds(0), /*early_results=*/true);
  send_membership(1, {"worker/x"}, 0, {"keeper/0", "keeper/1"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 1; }));
  ack_as_replica(0);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // the seeded state

  contribute(1, 1, {0.5f, 0.0f, 0.0f});  // lr 1, no momentum: theta - delta
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 2; }));
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 1u) << "results sent before every keeper had the whole commit";
  ack_as_replica(1, /*writing=*/true);  // the replica has it and writes it (the head's keeper says so itself)
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }))
      << "no provisional result while the round is written";
  std::uint64_t digest = 0;
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& held = worker_obs_.received[1];
    ASSERT_TRUE(held->envelope().isRoundResult());
    const auto r = held->envelope().getRoundResult();
    EXPECT_EQ(r.getRound(), 1u);
    EXPECT_TRUE(r.getProvisional());
    EXPECT_FALSE(r.getConfirms());
    const std::vector<float> expected = {0.5f, 2.0f, 3.0f};
    ASSERT_EQ(held->tensors().size(), 1u);
    EXPECT_EQ(held->tensors()[0].to_floats(), expected);
    EXPECT_EQ(r.getDigest(), digest64(expected.data(), expected.size() * sizeof(float)));
    digest = r.getDigest();
  }
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 2u) << "round 1 confirmed with only the head's keeper";
  ack_as_replica(1);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  const auto& confirmation = worker_obs_.received[2];
  ASSERT_TRUE(confirmation->envelope().isRoundResult());
  const auto r = confirmation->envelope().getRoundResult();
  EXPECT_EQ(r.getRound(), 1u);
  EXPECT_TRUE(r.getConfirms());
  EXPECT_FALSE(r.getProvisional());
  EXPECT_EQ(r.getDigest(), digest);
  EXPECT_TRUE(confirmation->tensors().empty()) << "a confirmation carries no tensor";
}

// A keeper that never said `writing` is dropped by a Membership (its node died): the
// keepers left all have the round, so its results go out early then, rather than whole
// after the commit; the confirmation still waits for the acknowledgement of every keeper left.
TEST_F(FencingTest, EarlyResultsGoOutWhenTheKeeperNotYetWritingIsDropped) {
  place_replica_probe();
  observations dropped_obs;
  dir_.add("keeper/2", sys_.spawn(probe_actor, &dropped_obs));
  mailer as_dropped(net_, "keeper/2", "cluster-test");
  const auto ack_as_dropped = [&](std::uint64_t round) {
    wire::outgoing out;
    auto ack = out.envelope.initCommitAck();
    ack.setFragment(0);
    ack.setRound(round);
    ack.setOk(true);
    as_dropped.send("coord/0", 1, out);
  };
  spawn_coordinator(1, {1.0f, 0.0f}, std::chrono::milliseconds(0), /*early_results=*/true);
  send_membership(1, {"worker/x"}, 0, {"keeper/1", "keeper/2"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 1; }));
  ack_as_replica(0);
  ack_as_dropped(0);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // the seeded state

  contribute(1, 1, {0.5f, 0.0f, 0.0f});
  ASSERT_TRUE(replica_obs_.wait_for([&] { return commits_seen() >= 2; }));
  ack_as_replica(1, /*writing=*/true);
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 1u) << "results sent while keeper/2 had not said it has the round";
  send_membership(2, {"worker/x"}, 0, {"keeper/1"});  // keeper/2's node is gone
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; }))
      << "no early result once every keeper left has the round";
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto r = worker_obs_.received[1]->envelope().getRoundResult();
    EXPECT_EQ(r.getRound(), 1u);
    EXPECT_TRUE(r.getProvisional());
  }
  settle(std::chrono::milliseconds(100));
  EXPECT_EQ(received_count(), 2u) << "confirmed before keeper/1 acknowledged";
  ack_as_replica(1);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 3; }));
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  const auto r = worker_obs_.received[2]->envelope().getRoundResult();
  EXPECT_EQ(r.getRound(), 1u);
  EXPECT_TRUE(r.getConfirms());
  EXPECT_TRUE(worker_obs_.received[2]->tensors().empty());
}

// storage.keepers = nodes: the head's keeper falls behind while the two replicas hold the
// commits, and comes back into a Membership when one replica is gone. A new coordinator asks
// every keeper of its Membership, waits for all of them (one not answering holds it until
// the Membership drops it), and resumes from the newest round, whichever keeper holds it.
TEST_F(FencingTest, ACoordinatorLoadingFromEveryKeeperResumesFromTheNewestRound) {
  ASSERT_FALSE(checkpoints_.commit({0, 3, 1, {1.0f, 1.0f, 1.0f}, {0.0f, 0.0f, 0.0f}}));  // keeper/0: behind
  auto replica_kv = make_memory_store();
  checkpoint_store replica_store(*replica_kv, 10);
  const fragment_checkpoint newest{0, 5, 1, {2.0f, -1.0f, 0.5f}, {0.25f, 0.0f, 0.0f}};
  ASSERT_FALSE(replica_store.commit(newest));
  dir_.add("keeper/2", sys_.spawn(keeper_actor, static_cast<transport*>(&net_), std::string("keeper/2"), cluster_.get(),
                                  &replica_store));
  coordinator_config cc;
  cc.min_workers = 1;
  cc.load_from_every_keeper = true;
  dir_.add("coord/0", sys_.spawn(coordinator_actor, static_cast<transport*>(&net_), cluster_.get(), cc));

  const auto states_locked = [&] {  // the rounds of the FragmentStates received; worker_obs_.mu held
    std::vector<std::uint64_t> rounds;
    for (const auto& m : worker_obs_.received)
      if (m->envelope().isFragmentState()) rounds.push_back(m->envelope().getFragmentState().getRound());
    return rounds;
  };
  const auto states = [&] {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    return states_locked();
  };
  send_membership(1, {"worker/x"}, 0, {"keeper/0", "keeper/1", "keeper/2"});  // keeper/1 never answers
  request_state_as(as_worker_);
  settle(std::chrono::milliseconds(200));
  EXPECT_TRUE(states().empty()) << "resumed without keeper/1's answer";

  send_membership(2, {"worker/x"}, 0, {"keeper/0", "keeper/2"});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return !states_locked().empty(); }));
  for (const auto round : states()) EXPECT_EQ(round, 5u) << "resumed from a keeper that is behind";
  {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    const auto& state = worker_obs_.received.front();
    ASSERT_EQ(state->tensors().size(), 1u);
    EXPECT_EQ(state->tensors()[0].to_floats(), newest.theta);
  }
  stop_actors();  // before replica_store goes
}

// Two workers as probes: worker/1.0 in the coordinator's process, worker/2.0 elsewhere.
class ReleaseOrderTest : public ProtocolTest {
 protected:
  ReleaseOrderTest() : near_(net_, "worker/1.0", "cluster-test"), far_(net_, "worker/2.0", "cluster-test") {
    dir_.add("worker/1.0", sys_.spawn(probe_actor, &near_obs_));
    dir_.add("worker/2.0", sys_.spawn(probe_actor, &far_obs_));
    net_.place_elsewhere("worker/2.0");
  }
  ~ReleaseOrderTest() override { stop_actors(); }  // before the observations go

  static bool got_result(observations& o) {
    return o.wait_for([&] { return !o.received.empty() && o.received.back()->envelope().isRoundResult(); });
  }

  mailer near_, far_;
  observations near_obs_, far_obs_;
};

// A worker in the coordinator's process gets its result last: it may finish on it, and a
// node whose workers are done exits. The results of workers elsewhere must be on their
// links by then (a relayed worker's last result was lost this way, now and then).
TEST_F(ReleaseOrderTest, AWorkerInTheCoordinatorsProcessGetsItsResultAfterTheOthers) {
  spawn_coordinator(2, {1.0f, 0.0f});
  send_membership(1, {"worker/1.0", "worker/2.0"});
  request_state_as(near_, {1.0f, 2.0f, 3.0f});
  request_state_as(far_);
  ASSERT_TRUE(near_obs_.wait_for([&] { return near_obs_.received.size() == 1; }));
  ASSERT_TRUE(far_obs_.wait_for([&] { return far_obs_.received.size() == 1; }));
  contribute_as(near_, 1, 1, {0.5f, 0.0f, 0.0f});
  contribute_as(far_, 1, 1, {0.5f, 0.0f, 0.0f});
  ASSERT_TRUE(got_result(near_obs_));
  ASSERT_TRUE(got_result(far_obs_));
  std::vector<std::string> round_end;  // the report and the results, in the order sent
  for (const auto& r : net_.receivers())
    if (r == "registry round_report" || r.find(" round_result") != std::string::npos) round_end.push_back(r);
  // The registry hears of the round first (a worker's WorkerDone after its last result must
  // not overtake it); the contributors are sorted (worker/1.0 first), and the one elsewhere
  // got its result first.
  EXPECT_EQ(round_end,
            (std::vector<std::string>{"registry round_report", "worker/2.0 round_result", "worker/1.0 round_result"}));
}

// RoundProgress reaches the registry at the tick after it changed, and otherwise every
// progress_keepalive (2 s), not every tick (1 s): with slices the head hears P x S
// coordinators, most of them waiting on their workers' steps most of the time.
TEST_F(FencingTest, ProgressGoesToTheRegistryWhenItChangesAndOtherwiseEveryKeepalive) {
  observations y_obs;
  ASSERT_TRUE(open_round_one_with_x_and_y(y_obs));
  const auto progress = [&] {
    std::vector<std::size_t> contributors;  // of each RoundProgress heard so far
    std::lock_guard<std::mutex> lock(obs_.mu);
    for (const auto& m : obs_.received)
      if (m->envelope().isRoundProgress())
        contributors.push_back(m->envelope().getRoundProgress().getContributors().size());
    return contributors;
  };
  settle(std::chrono::milliseconds(1500));  // the first ticks: round 1 opened, reported once
  const auto before = progress().size();
  ASSERT_GE(before, 1u);
  settle(std::chrono::milliseconds(10000));  // nothing changes for ten ticks
  const auto unchanged = progress().size() - before;
  EXPECT_GE(unchanged, 4u) << "kept alive";
  EXPECT_LE(unchanged, 6u) << "an unchanged round reported at every tick";
  contribute(1, 1, {0.5f, 0.0f, 0.0f});  // one of two in: it changed
  settle(std::chrono::milliseconds(1100));
  const auto heard = progress();
  EXPECT_EQ(heard.back(), 1u) << "the change heard at the next tick";
}

TEST_F(FencingTest, RepeatedStateRequestsAreAnsweredOnce) {
  spawn_coordinator(1);
  std::vector<float> init = {1.0f, 2.0f, 3.0f};
  for (int i = 0; i < 3; ++i) {  // a worker retrying before the run can start
    wire::outgoing req;
    req.envelope.initStateRequest().setFragment(0);
    req.tensors.push_back(wire::tensor::from_floats(init.data(), init.size()));
    as_worker_.send("coord/0", 0, req);
  }
  send_membership(1, {"worker/x"});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  settle(std::chrono::milliseconds(100));  // room for a wrong second answer
  EXPECT_EQ(received_count(), 1u);
}

TEST_F(FencingTest, AMessageFromAnotherClusterNeverReachesTheCoordinator) {
  spawn_coordinator(1);
  mailer stranger(net_, "worker/x", "some-other-cluster");
  wire::outgoing req;
  req.envelope.initStateRequest().setFragment(0);
  stranger.send("coord/0", 0, req);
  EXPECT_EQ(net_.counters().refused[static_cast<std::size_t>(errc::cluster_mismatch)].load(), 1u);
}

// No message may kill an actor (actors/shared/guarded_handler.hpp): a contribution its
// handler threw on is refused as unreadable and counted; the coordinator stays, and the same
// contribution sent again closes the round.
TEST_F(FencingTest, AHandlerThatThrowsRefusesItsMessageAndTheCoordinatorGoesOn) {
  ATL_SKIP_WITHOUT_THROW_POINTS();
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));
  const testing::armed_throw_point armed("coordinator.handler");
  contribute(1, 1, {0.5f, -1.0f, 0.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.refusals.size() == 1; }));
  EXPECT_EQ(worker_obs_.refusals[0], errc::malformed_frame);
  EXPECT_EQ(net_.counters().refused[static_cast<std::size_t>(errc::malformed_frame)].load(), 1u);
  contribute(1, 1, {0.5f, -1.0f, 0.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 2; })) << "no round after the throw";
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  ASSERT_TRUE(worker_obs_.received[1]->envelope().isRoundResult());
  EXPECT_EQ(worker_obs_.received[1]->tensors()[0].to_floats(), (std::vector<float>{0.5f, 3.0f, 3.0f}));
}

// ... and the keeper: a LoadRequest it threw on is refused; the next is answered.
TEST_F(FencingTest, AHandlerThatThrowsRefusesItsMessageAndTheKeeperGoesOn) {
  ATL_SKIP_WITHOUT_THROW_POINTS();
  const testing::armed_throw_point armed("keeper.handler");
  wire::outgoing load;
  load.envelope.initLoadRequest().setFragment(0);
  as_worker_.send("keeper/0", 1, load);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.refusals.size() == 1; }));
  EXPECT_EQ(worker_obs_.refusals[0], errc::malformed_frame);
  wire::outgoing again;
  again.envelope.initLoadRequest().setFragment(0);
  as_worker_.send("keeper/0", 1, again);
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; })) << "the keeper did not answer";
  std::lock_guard<std::mutex> lock(worker_obs_.mu);
  ASSERT_TRUE(worker_obs_.received[0]->envelope().isLoadReply());
  EXPECT_FALSE(worker_obs_.received[0]->envelope().getLoadReply().getFound());
}

}  // namespace
}  // namespace atl
