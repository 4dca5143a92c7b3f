// Protocol tier: real actors (coordinator, keeper, workers) in one process, talking
// through the in-memory transport (full encode and ingress on every message), with a
// deterministic fake replica instead of LibTorch. A probe actor stands in for the
// registry and records what the actors report.
//
// Everything runs on CAF's deterministic scheduler with simulated time, on the test's
// thread: a wait runs the actors until they are idle and then fires their timers one by
// one (a worker's 2 s retry, a round's deadline), and "nothing more happens" is checked by
// letting simulated time pass. No sleeps, no real clock.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/decisions/round_tracker.hpp"
#include "actors/keeper/keeper.hpp"
#include "actors/shared/commit_record.hpp"
#include "actors/shared/membership_delta.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "actors/worker/worker.hpp"
#include "runtime/core/digest.hpp"
#include "storage/checkpoint_store.hpp"
#include "tests/deterministic.hpp"
#include "tests/fake_replica.hpp"

namespace atl {
namespace {

using testing::fake_replica;

// How much simulated time a wait may let pass before it fails.
constexpr auto wait_limit = std::chrono::seconds(120);

// The scheduler of the running test (set by the fixture): the waits below drive it.
caf::scheduler::test_coordinator* simulation = nullptr;

// Runs the actors until `pred` holds: every job, then the next timer, and so on, for at
// most `limit` of simulated time. False if it never held.
template <class Pred>
bool run_until(Pred pred, std::chrono::milliseconds limit = wait_limit) {
  auto& sched = *simulation;
  const auto end = sched.clock().now() + limit;
  for (;;) {
    sched.run();
    if (pred()) return true;
    if (sched.clock().now() >= end || !sched.trigger_timeout()) return false;
  }
}

// Lets `span` of simulated time pass, running every job and every timer due within it.
void settle(std::chrono::milliseconds span) {
  auto& sched = *simulation;
  const auto end = sched.clock().now() + span;
  for (;;) {
    sched.run();
    const auto& timers = sched.clock().schedule();
    if (timers.empty() || timers.begin()->first > end) break;
    sched.trigger_timeout();
  }
  if (sched.clock().now() < end) sched.clock().advance_time(end - sched.clock().now());
  sched.run();
}

struct observed_round {
  std::uint64_t round = 0;
  std::uint64_t digest = 0;
  std::vector<std::string> participants;
  std::uint64_t bytes = 0;
};
struct observed_ack {
  std::string worker;
  std::uint64_t round = 0;
  std::uint64_t digest = 0;
};

struct observations {
  std::mutex mu;  // kept for the tests' lock_guards; one thread does everything
  std::vector<observed_round> rounds;
  std::vector<observed_ack> digests;  // results merged
  std::vector<observed_ack> adopted;  // states adopted (a joiner, a resync)
  std::set<std::string> done;
  std::vector<errc> refusals;
  std::vector<bool> held;  // StateHeld replies: their seedHeld
  std::vector<wire::message_ptr> received;  // everything else addressed to the probe

  template <class Pred>
  bool wait_for(Pred pred) {
    return run_until(pred);
  }
};

caf::behavior probe_actor(caf::event_based_actor*, observations* obs) {
  auto record = [obs](auto fn) {
    std::lock_guard<std::mutex> lock(obs->mu);
    fn();
  };
  return {
      [=](const wire::message_ptr& msg) {
        record([&] {
          const auto env = msg->envelope();
          if (env.isWorkerDone()) {
            obs->done.insert(msg->sender());
          } else if (env.isRefusal()) {
            obs->refusals.push_back(static_cast<errc>(env.getRefusal().getCode()));
          } else if (env.isStateHeld()) {
            obs->held.push_back(env.getStateHeld().getSeedHeld());
          } else if (env.isRoundReport()) {
            observed_round r{
                env.getRoundReport().getRound(), env.getRoundReport().getDigest(), {}, env.getRoundReport().getBytes()};
            for (const auto p : env.getRoundReport().getParticipants()) r.participants.push_back(p);
            obs->rounds.push_back(r);
          } else if (env.isRoundAck()) {
            const auto ack = env.getRoundAck();
            (ack.getAdopted() ? obs->adopted : obs->digests)
                .push_back({msg->sender(), ack.getRound(), ack.getDigest()});
          } else if (!env.isMembershipRequest() && !env.isProgress() && !env.isEvalReport()) {
            obs->received.push_back(msg);
          }
        });
      },
  };
}

// The in-memory transport, recording each message as "receiver kind" (e.g. "registry
// round_report"). Ids placed elsewhere are still delivered here, but the actors are told
// they live in another process.
class recording_transport : public memory_transport {
 public:
  using memory_transport::memory_transport;
  void send(const std::string& receiver, wire::frames frames) override {
    auto copy = frames;
    const auto msg = wire::decode(std::move(copy), wire::limits{});
    {
      std::lock_guard<std::mutex> lock(mu_);
      receivers_.push_back(receiver + " " + (msg ? wire::kind_name((*msg)->kind()) : "undecodable"));
    }
    memory_transport::send(receiver, std::move(frames));
  }
  bool delivers_in_process(const std::string& id) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return !elsewhere_.count(id) && memory_transport::delivers_in_process(id);
  }
  void place_elsewhere(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    elsewhere_.insert(id);
  }
  std::vector<std::string> receivers() const {
    std::lock_guard<std::mutex> lock(mu_);
    return receivers_;
  }

 private:
  mutable std::mutex mu_;
  std::set<std::string> elsewhere_;
  std::vector<std::string> receivers_;
};

// A contribution of raw fp32 values (encode() would refuse the NaN a test sends on purpose).
void contribute_as(mailer& as, std::uint64_t epoch, std::uint64_t round, const std::vector<float>& delta) {
  wire::outgoing out;
  auto c = out.envelope.initContribution();
  c.setFragment(0);
  c.setRound(round);
  c.setWeight(1.0f);
  encoded_values enc;
  enc.count = delta.size();
  enc.payload.resize(delta.size() * sizeof(float));
  std::memcpy(enc.payload.data(), delta.data(), enc.payload.size());
  put_contribution(c, std::move(enc), out);
  as.send("coord/0", epoch, out);
}

// A StateRequest; with `init`, a fresh coordinator seeds round 0 from it. `held_digest`:
// the digest of the values the sender says it holds.
void request_state_as(mailer& as, const std::vector<float>& init = {}, std::uint64_t held_digest = 0) {
  wire::outgoing req;
  req.envelope.initStateRequest().setFragment(0);
  req.envelope.getStateRequest().setHeldDigest(held_digest);
  if (!init.empty()) req.tensors.push_back(wire::tensor::from_floats(init.data(), init.size()));
  as.send("coord/0", 0, req);
}

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

class ProtocolTest : public ::testing::Test {
 protected:
  ProtocolTest()
      : kv_(make_memory_store()),
        checkpoints_(*kv_, 10),
        cluster_("cluster-test"),
        net_(dir_, cluster_),
        sys_(testing::deterministic(sys_cfg_)),
        sched_(testing::test_scheduler(sys_)) {
    simulation = &sched_;
    keeper_ = sys_.spawn(keeper_actor, static_cast<transport*>(&net_), std::string("keeper/0"), cluster_.get(),
                         &checkpoints_);
    dir_.add("keeper/0", keeper_);
    probe_ = sys_.spawn(probe_actor, &obs_);
    dir_.add("registry", probe_);
  }
  ~ProtocolTest() override { stop_actors(); }

  // Stops every actor and waits for them: they write into the observations, which must
  // outlive them (a derived fixture's members die before this base's destructor runs).
  void stop_actors() {
    for (const auto& id : dir_.ids()) caf::anon_send_exit(dir_.find(id), caf::exit_reason::user_shutdown);
    dir_.clear();
    keeper_ = probe_ = nullptr;
    sched_.run();  // every actor sees its exit
    sys_.await_all_actors_done();
  }

  caf::actor spawn_coordinator(std::size_t min_workers, outer_options outer = {0.7f, 0.9f},
                               std::chrono::milliseconds round_deadline = std::chrono::milliseconds(0),
                               bool early_results = false) {
    coordinator_config cc;
    cc.min_workers = min_workers;
    cc.outer = outer;
    cc.round_deadline = round_deadline;
    cc.early_results = early_results;
    auto c = sys_.spawn(coordinator_actor, static_cast<transport*>(&net_), cluster_.get(), cc);
    dir_.add("coord/0", c);
    return c;
  }

  // What the registry would send: the workers of an epoch.
  // quorum 0: the coordinator's min_workers.
  void send_membership(std::uint64_t epoch, const std::vector<std::string>& workers, std::uint32_t quorum = 0,
                       const std::vector<std::string>& keepers = {}) {
    mailer as_registry(net_, "registry", cluster_.get());
    wire::outgoing out;
    auto m = out.envelope.initMembership();
    m.setEpoch(epoch);
    m.setQuorum(quorum);
    auto keeper_list = m.initKeepers(static_cast<unsigned>(keepers.size()));
    for (unsigned i = 0; i < keepers.size(); ++i) keeper_list.set(i, keepers[i]);
    auto list = m.initWorkers(static_cast<unsigned>(workers.size()));
    for (unsigned i = 0; i < workers.size(); ++i) list.set(i, workers[i]);
    as_registry.send("coord/0", epoch, out);
  }

  std::unique_ptr<kv_store> kv_;
  checkpoint_store checkpoints_;
  directory dir_;
  cluster_identity cluster_;
  recording_transport net_;
  observations obs_;  // before the actor system: actors write into it until they stop
  caf::actor_system_config sys_cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  caf::actor keeper_, probe_;
};

TEST_F(ProtocolTest, ARoundWithThreeWorkersLeavesIdenticalDigestsEverywhere) {
  const std::vector<std::string> workers = {"worker/1.0", "worker/2.0", "worker/3.0"};
  spawn_coordinator(3);
  send_membership(1, workers);
  run_config run;
  run.steps = 20;
  run.sync_every = 5;
  run.log_every = 5;
  run.eval_every = 10;
  replica_factory factory = [](const run_config&, const replica_spec& s) {
    return std::make_unique<fake_replica>(s.rank);
  };
  for (std::uint32_t r = 0; r < workers.size(); ++r) {
    worker_config wc;
    wc.id = workers[r];
    wc.cluster_id = cluster_.get();
    wc.spec.rank = r;
    wc.spec.world_size = 3;
    wc.run = run;
    dir_.add(workers[r], sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
  }
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
    replica_factory factory = [](const run_config&, const replica_spec& s) {
      return std::make_unique<fake_replica>(s.rank);
    };
    for (std::uint32_t r = 0; r < workers; ++r) {
      worker_config wc;
      wc.id = ids[r];
      wc.cluster_id = cluster_.get();
      wc.spec.rank = r;
      wc.spec.world_size = workers;
      wc.run = run;
      dir_.add(ids[r], sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
    }
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

// Sends wire messages as "worker/x" and receives its replies through a probe.
class FencingTest : public ProtocolTest {
 protected:
  FencingTest() : as_worker_(net_, "worker/x", "cluster-test") {
    worker_probe_ = sys_.spawn(probe_actor, &worker_obs_);
    dir_.add("worker/x", worker_probe_);
  }
  ~FencingTest() override {
    worker_probe_ = nullptr;
    stop_actors();  // before worker_obs_ goes
  }

  void contribute(std::uint64_t epoch, std::uint64_t round, const std::vector<float>& delta) {
    contribute_as(as_worker_, epoch, round, delta);
  }

  std::size_t received_count() {
    std::lock_guard<std::mutex> lock(worker_obs_.mu);
    return worker_obs_.received.size();
  }

  // A StateRequest carrying parameters: a fresh coordinator seeds round 0 from them.
  void request_state_with(const std::vector<float>& init) { request_state_as(as_worker_, init); }

  // keeper/1 as a probe: it sees the CommitRequests and answers only as the test says.
  void place_replica_probe() { dir_.add("keeper/1", sys_.spawn(probe_actor, &replica_obs_)); }
  // Its CommitAck of `round`, or (writing) its notice that it has the whole request.
  void ack_as_replica(std::uint64_t round, bool writing = false) {
    wire::outgoing out;
    auto ack = out.envelope.initCommitAck();
    ack.setFragment(0);
    ack.setRound(round);
    ack.setOk(!writing);
    ack.setWriting(writing);
    as_replica_.send("coord/0", 1, out);
  }
  std::size_t commits_seen() {  // by the replica probe; callers hold replica_obs_.mu or wait_for it
    std::size_t n = 0;
    for (const auto& m : replica_obs_.received) n += m->envelope().isCommitRequest();
    return n;
  }

  mailer as_worker_;
  observations worker_obs_;
  caf::actor worker_probe_;
  mailer as_replica_{net_, "keeper/1", "cluster-test"};
  observations replica_obs_;
};

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
  spawn_coordinator(1, {1.0f, 0.0f});
  send_membership(1, {"worker/x", "worker/y"});
  request_state_with({1.0f, 2.0f, 3.0f});
  ASSERT_TRUE(worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; }));  // round 1 is open
  observations y_obs;
  dir_.add("worker/y", sys_.spawn(probe_actor, &y_obs));
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
  const membership_view e1{1, {"worker/x"}, 0, {}}, e2{2, {"worker/x", "worker/w"}, 0, {}};
  const membership_view e3{3, {"worker/w", "worker/x", "worker/y"}, 0, {}};
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

// A replica keeper placed on a node catches up from the head's keeper: the latest round of
// every fragment, bit for bit. A LoadReply from anyone else is refused.
TEST_F(ProtocolTest, AReplicaKeeperCatchesUpFromItsSource) {
  fragment_checkpoint cp{0, 3, 2, {1.0f, -0.0f, 1e-40f}, {0.5f, 0.25f, 0.125f}};
  ASSERT_FALSE(checkpoints_.commit(cp));
  auto storage = std::make_shared<keeper_storage>();
  storage->db = make_memory_store();
  storage->checkpoints = std::make_unique<checkpoint_store>(*storage->db, 10);
  const auto* replica_store = storage->checkpoints.get();
  dir_.add("keeper/1", sys_.spawn(keeper_replica_actor, static_cast<transport*>(&net_), std::string("keeper/1"),
                                  cluster_.get(), storage, std::string("keeper/0"), std::uint32_t{2}));
  const bool caught_up = run_until([&] {
    auto latest = replica_store->latest(0);
    return latest && latest->has_value() && (*latest)->round == 3;
  });
  ASSERT_TRUE(caught_up);
  auto latest = replica_store->latest(0);
  EXPECT_EQ((*latest)->theta, cp.theta);
  EXPECT_EQ((*latest)->momentum, cp.momentum);
  EXPECT_FALSE(replica_store->latest(1)->has_value());  // fragment 1 has nothing yet

  mailer stranger(net_, "registry", cluster_.get());
  wire::outgoing forged;
  auto reply = forged.envelope.initLoadReply();
  reply.setFragment(1);
  reply.setFound(true);
  reply.setRound(9);
  forged.tensors.push_back(wire::tensor::from_floats(cp.theta.data(), cp.theta.size()));
  forged.tensors.push_back(wire::tensor::from_floats(cp.momentum.data(), cp.momentum.size()));
  stranger.send("keeper/1", 1, forged);
  ASSERT_TRUE(obs_.wait_for([&] { return !obs_.refusals.empty(); }));
  EXPECT_EQ(obs_.refusals[0], errc::unexpected_message);
  EXPECT_FALSE(replica_store->latest(1)->has_value());
}

// A replica's source that never answers (its node died after the replica was placed) is
// asked every second for the fragments still missing, but no longer for one a coordinator
// has committed to the replica since: that round is the fragment's newest.
TEST_F(ProtocolTest, AReplicaStopsAskingItsSourceForAFragmentCommittedToIt) {
  observations source_obs, coord_obs;
  dir_.add("keeper/9", sys_.spawn(probe_actor, &source_obs));  // silent
  dir_.add("coord/0", sys_.spawn(probe_actor, &coord_obs));
  auto storage = std::make_shared<keeper_storage>();
  storage->db = make_memory_store();
  storage->checkpoints = std::make_unique<checkpoint_store>(*storage->db, 10);
  dir_.add("keeper/1", sys_.spawn(keeper_replica_actor, static_cast<transport*>(&net_), std::string("keeper/1"),
                                  cluster_.get(), storage, std::string("keeper/9"), std::uint32_t{2}));
  const auto asked = [&](std::uint32_t fragment) {  // LoadRequests so far; source_obs.mu held
    std::size_t n = 0;
    for (const auto& m : source_obs.received)
      n += m->envelope().isLoadRequest() && m->envelope().getLoadRequest().getFragment() == fragment;
    return n;
  };
  ASSERT_TRUE(source_obs.wait_for([&] { return asked(0) >= 2 && asked(1) >= 2; })) << "not asked again";

  mailer as_coordinator(net_, "coord/0", cluster_.get());
  wire::outgoing out;
  auto req = out.envelope.initCommitRequest();
  req.setFragment(0);
  req.setRound(4);
  const std::vector<float> theta = {1.0f, 2.0f}, momentum = {0.0f, 0.0f};
  out.tensors.push_back(wire::tensor::from_floats(theta.data(), theta.size()));
  out.tensors.push_back(wire::tensor::from_floats(momentum.data(), momentum.size()));
  as_coordinator.send("keeper/1", 5, out);
  ASSERT_TRUE(coord_obs.wait_for([&] {
    for (const auto& m : coord_obs.received)
      if (m->envelope().isCommitAck() && m->envelope().getCommitAck().getOk()) return true;
    return false;
  }));
  std::size_t fragment0_then = 0, fragment1_then = 0;
  {
    std::lock_guard<std::mutex> lock(source_obs.mu);
    fragment0_then = asked(0);
    fragment1_then = asked(1);
  }
  ASSERT_TRUE(source_obs.wait_for([&] { return asked(1) >= fragment1_then + 2; })) << "fragment 1 no longer asked";
  std::lock_guard<std::mutex> lock(source_obs.mu);
  EXPECT_EQ(asked(0), fragment0_then) << "fragment 0 was committed here: its source was asked again";
}

// The keeper as the round log's follower: a record it cannot follow (nothing held, or a
// round missing before it) is refused as behind and changes nothing; a full state gives it
// a base; a record that follows is acknowledged with its digest, and the keeper then holds
// the coordinator's theta, momentum and residual (LoadReply). A record whose replay misses
// its logged digest is reported to the coordinator as digest_mismatch, and the state it
// leaves is never served.
TEST_F(ProtocolTest, AKeeperFollowsTheRoundLogAndIsSentTheFullStateWhenBehind) {
  observations coord_obs;
  dir_.add("coord/0", sys_.spawn(probe_actor, &coord_obs));
  mailer as_coordinator(net_, "coord/0", cluster_.get());
  // Rounds 1 to 3 of a coordinator: one worker, int8 contributions, int8 results.
  round_tracker tracker(0, {0.7f, 0.9f});
  tracker.encode_results(codec_kind::int8, 2);
  ASSERT_FALSE(tracker.seed({1.0f, -2.0f, 0.5f, 4.0f}));
  ASSERT_FALSE(tracker.committed());
  const auto seed_theta = tracker.theta();
  std::vector<round_record> records;
  std::vector<std::vector<float>> thetas, momenta, residuals;
  for (std::uint64_t r = 1; r <= 3; ++r) {
    ASSERT_FALSE(tracker.open(1, {"worker/1.0"}));
    const std::vector<float> delta = {0.1f * r, -0.2f, 0.3f, 0.05f};
    encoded_values enc;
    ASSERT_FALSE(encode(codec_kind::int8, delta.data(), delta.size(), 2, enc));
    std::vector<float> decoded(delta.size());
    ASSERT_FALSE(decode(enc, decoded.data()));
    ASSERT_TRUE(tracker.add("worker/1.0", 1, r, decoded, 1.0f));
    round_record rec;
    rec.round = r;
    rec.count = delta.size();
    rec.rule = tracker.rule_of_rounds();
    rec.theta_digest = digest64(tracker.theta().data(), tracker.theta().size() * sizeof(float));
    rec.inputs.push_back({"worker/1.0", 1.0f, codec_kind::int8, 2, byte_buffer(enc.payload),
                          byte_buffer(reinterpret_cast<const std::uint8_t*>(enc.scales.data()),
                                      reinterpret_cast<const std::uint8_t*>(enc.scales.data() + enc.scales.size()))});
    records.push_back(rec);
    thetas.push_back(tracker.theta());
    momenta.push_back(tracker.momentum());
    residuals.push_back(tracker.residual());
    ASSERT_FALSE(tracker.committed());
  }
  auto send_record = [&](const round_record& rec) {
    wire::outgoing out;
    put_commit_record(out.envelope.initCommitRequest(), rec);
    out.tensors = record_tensors(rec);
    as_coordinator.send("keeper/0", 1, out);
  };
  auto acks = [&] {  // (round, ok, behind, digest) of every acknowledgement so far
    std::vector<std::tuple<std::uint64_t, bool, bool, std::uint64_t>> out;
    for (const auto& m : coord_obs.received)
      if (m->envelope().isCommitAck() && !m->envelope().getCommitAck().getWriting()) {
        const auto a = m->envelope().getCommitAck();
        out.emplace_back(a.getRound(), a.getOk(), a.getBehind(), a.getDigest());
      }
    return out;
  };
  send_record(records[0]);  // nothing held yet
  ASSERT_TRUE(coord_obs.wait_for([&] { return acks().size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs.mu);
    EXPECT_FALSE(std::get<1>(acks()[0]));
    EXPECT_TRUE(std::get<2>(acks()[0])) << "a keeper with nothing to apply round 1 to is behind";
  }
  {
    wire::outgoing out;  // the seed: the full state of round 0
    auto req = out.envelope.initCommitRequest();
    req.setFragment(0);
    req.setRound(0);
    const std::vector<float> zeros(seed_theta.size(), 0.0f);
    out.tensors.push_back(wire::tensor::from_floats(seed_theta.data(), seed_theta.size()));
    out.tensors.push_back(wire::tensor::from_floats(zeros.data(), zeros.size()));
    as_coordinator.send("keeper/0", 1, out);
  }
  send_record(records[0]);
  send_record(records[2]);  // round 2 is missing here
  ASSERT_TRUE(coord_obs.wait_for([&] { return acks().size() == 4; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs.mu);
    const auto a = acks();
    EXPECT_TRUE(std::get<1>(a[1])) << "the seed";
    EXPECT_TRUE(std::get<1>(a[2])) << "round 1 follows the seed";
    EXPECT_EQ(std::get<3>(a[2]), records[0].theta_digest);
    EXPECT_FALSE(std::get<1>(a[3]));
    EXPECT_TRUE(std::get<2>(a[3])) << "round 3 without round 2 is behind";
  }
  send_record(records[1]);
  send_record(records[2]);
  ASSERT_TRUE(coord_obs.wait_for([&] { return acks().size() == 6; }));
  {
    wire::outgoing load;
    load.envelope.initLoadRequest().setFragment(0);
    as_coordinator.send("keeper/0", 1, load);
  }
  const auto load_reply = [&]() -> wire::message_ptr {
    for (const auto& m : coord_obs.received)
      if (m->envelope().isLoadReply()) return m;
    return nullptr;
  };
  ASSERT_TRUE(coord_obs.wait_for([&] { return load_reply() != nullptr; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs.mu);
    const auto reply = load_reply();
    EXPECT_EQ(reply->envelope().getLoadReply().getRound(), 3u);
    ASSERT_EQ(reply->tensors().size(), 3u) << "theta, momentum and the residual";
    EXPECT_EQ(reply->tensors()[0].to_floats(), thetas[2]);
    EXPECT_EQ(reply->tensors()[1].to_floats(), momenta[2]);
    EXPECT_EQ(reply->tensors()[2].to_floats(), residuals[2]);
  }
  // Round 4 whose logged digest is not what its inputs give.
  auto wrong = records[2];
  wrong.round = 4;
  wrong.theta_digest ^= 1;
  send_record(wrong);
  const auto mismatch = [&] {
    return std::count(coord_obs.refusals.begin(), coord_obs.refusals.end(), errc::digest_mismatch) > 0;
  };
  ASSERT_TRUE(coord_obs.wait_for(mismatch)) << "the keeper did not report the replay that missed its digest";
  EXPECT_EQ(checkpoints_.health().replay_mismatches, 1u) << "counted for /metrics";
  auto served = checkpoints_.latest(0);
  ASSERT_FALSE(served) << "a round whose replay misses its digest must not be served";
  EXPECT_EQ(served.err().code, errc::digest_mismatch);
}

// S5 at the keeper: once a coordinator of epoch 5 loaded, a commit from epoch 3 (the one it
// replaced, whose messages may still arrive) is refused as stale_epoch and changes nothing,
// unless it repeats the latest round with the same bytes. Chunks are served from a stored
// round, and found=false for one the keeper does not hold.
TEST_F(ProtocolTest, TheKeeperFencesCommitsOfReplacedCoordinatorsAndServesChunks) {
  observations coord_obs;
  dir_.add("coord/0", sys_.spawn(probe_actor, &coord_obs));
  mailer as_coordinator(net_, "coord/0", cluster_.get());
  auto commit = [&](std::uint64_t epoch, std::uint64_t round, std::vector<float> theta) {
    wire::outgoing out;
    auto req = out.envelope.initCommitRequest();
    req.setFragment(0);
    req.setRound(round);
    std::vector<float> momentum(theta.size(), 0.0f);
    out.tensors.push_back(wire::tensor::from_floats(theta.data(), theta.size()));
    out.tensors.push_back(wire::tensor::from_floats(momentum.data(), momentum.size()));
    as_coordinator.send("keeper/0", epoch, out);
  };
  auto acks = [&] {
    std::vector<std::pair<bool, std::string>> out;
    for (const auto& m : coord_obs.received)
      if (m->envelope().isCommitAck() && !m->envelope().getCommitAck().getWriting())
        out.emplace_back(m->envelope().getCommitAck().getOk(), m->envelope().getCommitAck().getError());
    return out;
  };
  auto writing_notices = [&] {
    std::size_t n = 0;
    for (const auto& m : coord_obs.received)
      n += m->envelope().isCommitAck() && m->envelope().getCommitAck().getWriting();
    return n;
  };
  commit(3, 1, {1.0f, 2.0f});
  ASSERT_TRUE(coord_obs.wait_for([&] { return acks().size() == 1; }));
  {
    wire::outgoing load;  // the successor, placed in epoch 5
    load.envelope.initLoadRequest().setFragment(0);
    as_coordinator.send("keeper/0", 5, load);
  }
  commit(3, 2, {9.0f, 9.0f});  // the dead coordinator's late commit
  commit(3, 1, {1.0f, 2.0f});  // its retry of round 1, same bytes
  commit(5, 2, {3.0f, 4.0f});  // the successor's round 2
  ASSERT_TRUE(coord_obs.wait_for([&] { return acks().size() == 4; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs.mu);
    EXPECT_EQ(writing_notices(), 4u) << "each well-formed request is announced before it is written";
    const auto a = acks();
    EXPECT_TRUE(a[0].first);
    EXPECT_FALSE(a[1].first);
    EXPECT_NE(a[1].second.find("stale_epoch"), std::string::npos) << a[1].second;
    EXPECT_TRUE(a[2].first) << a[2].second;
    EXPECT_TRUE(a[3].first) << a[3].second;
  }
  auto latest = checkpoints_.latest(0);
  ASSERT_TRUE(latest && latest->has_value());
  EXPECT_EQ((*latest)->round, 2u);
  EXPECT_EQ((*latest)->theta, (std::vector<float>{3.0f, 4.0f}));

  auto ask_chunk = [&](std::uint64_t round) {
    wire::outgoing out;
    auto req = out.envelope.initChunkRequest();
    req.setFragment(0);
    req.setRound(round);
    req.setOffset(1);
    req.setCount(100);
    as_coordinator.send("keeper/0", 5, out);
  };
  auto chunks = [&] {
    std::vector<wire::message_ptr> out;
    for (const auto& m : coord_obs.received)
      if (m->envelope().isChunkReply()) out.push_back(m);
    return out;
  };
  ask_chunk(2);
  ask_chunk(7);
  ASSERT_TRUE(coord_obs.wait_for([&] { return chunks().size() == 2; }));
  std::lock_guard<std::mutex> lock(coord_obs.mu);
  const auto c = chunks();
  EXPECT_TRUE(c[0]->envelope().getChunkReply().getFound());
  ASSERT_EQ(c[0]->tensors().size(), 1u);
  EXPECT_EQ(c[0]->tensors()[0].to_floats(), std::vector<float>{4.0f});  // from offset 1, clipped at the end
  EXPECT_FALSE(c[1]->envelope().getChunkReply().getFound());
  EXPECT_TRUE(c[1]->tensors().empty());
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

// A real worker whose coordinator is a probe: the test plays the coordinator, answering
// or not, to drive the worker's recovery paths.
class WorkerRecoveryTest : public ProtocolTest {
 protected:
  WorkerRecoveryTest() : as_coordinator_(net_, "coord/0", "cluster-test") {
    coord_probe_ = sys_.spawn(probe_actor, &coord_obs_);
    dir_.add("coord/0", coord_probe_);
  }
  ~WorkerRecoveryTest() override {
    coord_probe_ = nullptr;
    stop_actors();  // before coord_obs_ goes
  }

  void spawn_worker(std::int64_t result_timeout_ms, std::int64_t state_chunk_values = 1 << 20,
                    const std::string& weighting = "samples") {
    worker_config wc;
    wc.id = "worker/1.0";
    wc.cluster_id = cluster_.get();
    wc.run.steps = 1000;
    wc.run.sync_every = 5;
    wc.run.weighting = weighting;
    wc.run.result_timeout_ms = result_timeout_ms;
    wc.run.state_chunk_values = state_chunk_values;
    replica_factory factory = [](const run_config&, const replica_spec& s) {
      return std::make_unique<fake_replica>(s.rank);
    };
    dir_.add(wc.id, sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
  }

  // FragmentState of fragment 0 at `round`, as a coordinator sends it in `epoch`.
  void send_state(std::uint64_t round, std::uint64_t epoch = 1) {
    fake_replica initial(0);
    std::vector<float> theta(initial.fragment_size(0));
    initial.read_fragment(0, theta.data());
    wire::outgoing out;
    auto fs = out.envelope.initFragmentState();
    fs.setFragment(0);
    fs.setRound(round);
    out.tensors.push_back(wire::tensor::from_floats(theta.data(), theta.size()));
    as_coordinator_.send("worker/1.0", epoch, out);
  }

  // FragmentState of fragment 0 at `round` as a header: `theta`'s count and digest, and
  // the keepers to fetch it from.
  void send_header(std::uint64_t round, const std::vector<float>& theta, const std::vector<std::string>& keepers) {
    wire::outgoing out;
    auto fs = out.envelope.initFragmentState();
    fs.setFragment(0);
    fs.setRound(round);
    fs.setCount(theta.size());
    fs.setDigest(digest64(theta.data(), theta.size() * sizeof(float)));
    auto listed = fs.initKeepers(static_cast<unsigned>(keepers.size()));
    for (unsigned i = 0; i < keepers.size(); ++i) listed.set(i, keepers[i]);
    as_coordinator_.send("worker/1.0", 1, out);
  }

  // The i-th and j-th contributions the coordinator probe received.
  std::pair<wire::message_ptr, wire::message_ptr> contributions(std::size_t i, std::size_t j) {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    std::vector<wire::message_ptr> found;
    for (const auto& m : coord_obs_.received)
      if (m->envelope().isContribution()) found.push_back(m);
    return {found.at(i), found.at(j)};
  }

  // (state requests, contributions) the coordinator probe has received so far. Call with
  // coord_obs_.mu held: wait_for() predicates already hold it.
  std::pair<int, int> seen_locked() const {
    int requests = 0, contributions = 0;
    for (const auto& m : coord_obs_.received) {
      requests += m->envelope().isStateRequest();
      contributions += m->envelope().isContribution();
    }
    return {requests, contributions};
  }
  std::pair<int, int> seen() {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    return seen_locked();
  }

  // The worker's first contribution and its resend after the timeout both carry `weight`.
  void expect_contribution_weights(float weight) {
    ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
    send_state(0);
    ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; }));
    const auto [first, again] = contributions(0, 1);
    EXPECT_EQ(first->envelope().getContribution().getWeight(), weight);
    EXPECT_EQ(again->envelope().getContribution().getWeight(), weight);
  }

  mailer as_coordinator_;
  observations coord_obs_;
  caf::actor coord_probe_;
};

// The coordinator does not answer the contribution (lost, or its round waits on a slow
// peer): after diloco.result_timeout_ms the worker sends the same contribution again.
// Refused as wrong_round (the round closed and its result was lost), it resyncs, and trains
// on meanwhile.
TEST_F(WorkerRecoveryTest, AnOverdueResultResendsTheContributionAndAClosedRoundResyncs) {
  spawn_worker(300);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));  // it trained H steps and contributed
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; })) << "no resend after the timeout";
  const auto [first, again] = contributions(0, 1);
  EXPECT_EQ(again->tensors()[0].data, first->tensors()[0].data);
  EXPECT_EQ(seen().first, 1);

  as_coordinator_.refuse(*again, make_error(errc::wrong_round, "round 1 is closed"), 1);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 2; })) << "no StateRequest after wrong_round";
  send_state(1);
  ASSERT_TRUE(coord_obs_.wait_for([&] {
    const auto& last = coord_obs_.received.back();
    return last->envelope().isContribution() && last->envelope().getContribution().getRound() == 2;
  })) << "training did not go on from round 1";
}

// diloco.weighting = samples: a contribution weighs the samples its worker trained since it
// last synced the fragment (the fake replica's steps report one each, H = 5), and its resend
// weighs the same; uniform: 1.
TEST_F(WorkerRecoveryTest, AContributionWeighsTheSamplesTrainedSinceTheLastSync) {
  spawn_worker(300, 1 << 20, "samples");
  expect_contribution_weights(5.0f);
}

TEST_F(WorkerRecoveryTest, AUniformContributionWeighsOne) {
  spawn_worker(300, 1 << 20, "uniform");
  expect_contribution_weights(1.0f);
}

// A large fragment's state comes as a header; the worker fetches it in chunks from the
// keepers named. The first keeper goes silent after one chunk: two seconds later the
// worker asks the second one, from the first missing value, checks the digest and trains.
TEST_F(WorkerRecoveryTest, AChunkedStateTransferResumesFromTheNextKeeperWhenItsSourceGoesSilent) {
  observations k0_obs, k1_obs;
  dir_.add("keeper/0", sys_.spawn(probe_actor, &k0_obs));
  dir_.add("keeper/1", sys_.spawn(probe_actor, &k1_obs));
  mailer as_k0(net_, "keeper/0", "cluster-test"), as_k1(net_, "keeper/1", "cluster-test");
  fake_replica initial(0);
  std::vector<float> theta(initial.fragment_size(0));
  initial.read_fragment(0, theta.data());
  for (auto& v : theta) v += 1.0f;  // not the values the worker starts with: it must fetch them
  auto answer = [&](mailer& as, const wire::message_ptr& req) {
    const auto r = req->envelope().getChunkRequest();
    wire::outgoing out;
    auto reply = out.envelope.initChunkReply();
    reply.setFragment(0);
    reply.setRound(r.getRound());
    reply.setOffset(r.getOffset());
    reply.setFound(true);
    const auto n = std::min<std::uint64_t>(r.getCount(), theta.size() - r.getOffset());
    out.tensors.push_back(wire::tensor::from_floats(theta.data() + r.getOffset(), n));
    as.send("worker/1.0", 1, out);
  };
  auto chunk_requests = [](observations& o) {
    std::vector<wire::message_ptr> found;
    for (const auto& m : o.received)
      if (m->envelope().isChunkRequest()) found.push_back(m);
    return found;
  };

  spawn_worker(600000, 40);  // 97 values: chunks at 0, 40, 80
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_header(0, theta, {"keeper/0", "keeper/1"});
  ASSERT_TRUE(k0_obs.wait_for([&] { return chunk_requests(k0_obs).size() == 1; }));
  wire::message_ptr first;
  {
    std::lock_guard<std::mutex> lock(k0_obs.mu);
    first = chunk_requests(k0_obs)[0];
  }
  answer(as_k0, first);  // values 0..39, then keeper/0 falls silent
  ASSERT_TRUE(k0_obs.wait_for([&] { return chunk_requests(k0_obs).size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(k0_obs.mu);
    EXPECT_EQ(chunk_requests(k0_obs)[1]->envelope().getChunkRequest().getOffset(), 40u);
  }
  ASSERT_TRUE(k1_obs.wait_for([&] { return chunk_requests(k1_obs).size() == 1; })) << "no resume from keeper/1";
  wire::message_ptr resume;
  {
    std::lock_guard<std::mutex> lock(k1_obs.mu);
    resume = chunk_requests(k1_obs)[0];
  }
  EXPECT_EQ(resume->envelope().getChunkRequest().getOffset(), 40u);  // resumed, not restarted
  answer(as_k1, resume);
  ASSERT_TRUE(k1_obs.wait_for([&] { return chunk_requests(k1_obs).size() == 2; }));
  {
    std::lock_guard<std::mutex> lock(k1_obs.mu);
    resume = chunk_requests(k1_obs)[1];
  }
  EXPECT_EQ(resume->envelope().getChunkRequest().getOffset(), 80u);
  answer(as_k1, resume);
  // The digest matched: it trained H steps and contributed round 1.
  EXPECT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  EXPECT_EQ(seen().first, 1);  // one StateRequest: no fallback to the coordinator
}

// Workers start from the same seed, so a fresh run's first state is what each one holds:
// the worker's StateRequest names the digest of its values, and a header with that digest
// is adopted from them, with no chunk asked of any keeper.
TEST_F(WorkerRecoveryTest, AStateWhoseBytesTheWorkerHoldsIsAdoptedWithoutAFetch) {
  observations k0_obs;
  dir_.add("keeper/0", sys_.spawn(probe_actor, &k0_obs));
  fake_replica initial(0);  // the worker's replica, as it starts
  std::vector<float> theta(initial.fragment_size(0));
  initial.read_fragment(0, theta.data());

  spawn_worker(600000, 40);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    const auto req = coord_obs_.received[0]->envelope();
    ASSERT_TRUE(req.isStateRequest());
    EXPECT_EQ(req.getStateRequest().getHeldDigest(), digest64(theta.data(), theta.size() * sizeof(float)));
  }
  send_header(0, theta, {"keeper/0"});
  // It trained H steps and contributed round 1, and asked no keeper for anything.
  EXPECT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  EXPECT_EQ(seen().first, 1);
  std::lock_guard<std::mutex> lock(k0_obs.mu);
  EXPECT_TRUE(k0_obs.received.empty()) << k0_obs.received.size() << " messages to the keeper";
}

// The node's link to the head came back (a restarted head): messages in flight may be
// lost, so the worker sends its pending contribution again, bytes unchanged.
TEST_F(WorkerRecoveryTest, AReconnectMakesTheWorkerResendItsPendingContribution) {
  spawn_worker(600000);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  caf::anon_send(dir_.find("worker/1.0"), resend_atom::value);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; })) << "nothing resent";
  const auto [first, again] = contributions(0, 1);
  EXPECT_EQ(again->envelope().getContribution().getRound(), 1u);
  EXPECT_EQ(again->tensors()[0].data, first->tensors()[0].data);
  EXPECT_EQ(seen().first, 1);
}

// Rank 0's first StateRequest carries no parameters. A StateHeld that says the coordinator
// holds no seed gets them sent at once (not at the next retry); once it says it holds one,
// the repeats carry none again.
TEST_F(WorkerRecoveryTest, RankZeroSendsItsParametersOnlyWhileTheCoordinatorNeedsASeed) {
  spawn_worker(600000);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 1; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    EXPECT_TRUE(coord_obs_.received[0]->tensors().empty()) << "the first request asks without them";
  }
  auto say_held = [&](bool seed_held) {
    wire::outgoing out;
    auto held = out.envelope.initStateHeld();
    held.setFragment(0);
    held.setSeedHeld(seed_held);
    as_coordinator_.send("worker/1.0", 1, out);
  };
  const auto asked_at = sched_.clock().now();
  say_held(false);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 2; }));
  EXPECT_LT(sched_.clock().now() - asked_at, std::chrono::seconds(1)) << "sent at once, not at a retry";
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    EXPECT_EQ(coord_obs_.received.back()->tensors().size(), 1u) << "the parameters the coordinator asked for";
  }
  say_held(true);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 3; })) << "no repeat";
  std::lock_guard<std::mutex> lock(coord_obs_.mu);
  EXPECT_TRUE(coord_obs_.received.back()->envelope().isStateRequest());
  EXPECT_TRUE(coord_obs_.received.back()->tensors().empty()) << "the repeat carried the parameters again";
}

// A re-placed coordinator announces the committed state without being asked, in its new
// epoch. A worker waiting on the result of the round it reopened sends the same
// contribution again, stamped with that epoch, long before its result timeout.
TEST_F(WorkerRecoveryTest, AnAnnouncedStateOfTheSameRoundGetsTheSameContributionAgain) {
  spawn_worker(600000);  // the timeout must not be what frees it
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  send_state(0, 7);  // unasked: the new coordinator's announcement
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; }));
  const auto [first, again] = contributions(0, 1);
  EXPECT_EQ(again->epoch(), 7u);
  EXPECT_EQ(again->envelope().getContribution().getRound(), 1u);
  EXPECT_EQ(again->tensors()[0].data, first->tensors()[0].data);
  EXPECT_EQ(seen().first, 1);  // no second request was needed
}

// The new coordinator had committed the round before it died, without releasing it: the
// announced state is newer than the worker's, which adopts it and goes on from it.
TEST_F(WorkerRecoveryTest, AnAnnouncedNewerStateIsAdopted) {
  spawn_worker(600000);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  send_state(1, 7);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    const auto& next = coord_obs_.received.back();
    ASSERT_TRUE(next->envelope().isContribution());
    EXPECT_EQ(next->envelope().getContribution().getRound(), 2u);  // trained on from round 1
    EXPECT_EQ(next->epoch(), 7u);
  }
  // The registry hears of both states, as adopted: its views show round 1, and neither
  // counts as a merged result.
  fake_replica initial(0);
  std::vector<float> theta(initial.fragment_size(0));
  initial.read_fragment(0, theta.data());
  ASSERT_TRUE(obs_.wait_for([&] { return obs_.adopted.size() == 2; }));
  std::lock_guard<std::mutex> lock(obs_.mu);
  EXPECT_EQ(obs_.adopted[0].round, 0u);
  EXPECT_EQ(obs_.adopted[1].round, 1u);
  EXPECT_EQ(obs_.adopted[1].worker, "worker/1.0");
  EXPECT_EQ(obs_.adopted[1].digest, digest64(theta.data(), theta.size() * sizeof(float)));
  EXPECT_TRUE(obs_.digests.empty());
}

// Early results at the worker: a confirmation that carries tensors is malformed and
// refused (tensor_mismatch), changing nothing; one that finds no held result of its round
// (the provisional one was lost or refused) is refused as not_ready, and the worker asks
// for the committed state, which brings it to the round with the coordinator's bits.
TEST_F(WorkerRecoveryTest, AConfirmationWithTensorsIsRefusedAndOneWithNothingHeldAsksForTheState) {
  spawn_worker(600000);  // the timeout must not be what asks
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));  // contributed to round 1
  const auto confirm = [&](bool with_tensor) {
    wire::outgoing out;
    auto r = out.envelope.initRoundResult();
    r.setFragment(0);
    r.setRound(1);
    r.setDigest(42);
    r.setConfirms(true);
    const std::vector<float> values = {1.0f, 2.0f};
    if (with_tensor) out.tensors.push_back(wire::tensor::from_floats(values.data(), values.size()));
    as_coordinator_.send("worker/1.0", 1, out);
  };
  confirm(/*with_tensor=*/true);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.refusals.size() == 1; }));
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    EXPECT_EQ(coord_obs_.refusals[0], errc::tensor_mismatch);
    EXPECT_EQ(seen_locked().first, 1) << "a malformed confirmation made the worker ask";
  }
  {
    std::lock_guard<std::mutex> lock(obs_.mu);
    EXPECT_TRUE(obs_.digests.empty()) << "a malformed confirmation was taken";
  }

  confirm(/*with_tensor=*/false);  // nothing provisional is held
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.refusals.size() == 2 && seen_locked().first >= 2; }))
      << "no StateRequest after a confirmation of nothing held";
  {
    std::lock_guard<std::mutex> lock(coord_obs_.mu);
    EXPECT_EQ(coord_obs_.refusals[1], errc::not_ready);
  }
  std::lock_guard<std::mutex> lock(obs_.mu);
  EXPECT_TRUE(obs_.digests.empty()) << "a round merged without its result";
}

// Refused as stale_epoch (its round opened in a newer epoch): the worker sends the same
// bytes again in the refusal's epoch. Refused for any other reason: it resyncs.
TEST_F(WorkerRecoveryTest, AStaleEpochRefusalResendsOtherRefusalsResync) {
  spawn_worker(600000);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  as_coordinator_.refuse(*contributions(0, 0).first, make_error(errc::stale_epoch, "round 1 is in epoch 4"), 4);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 2; }));
  const auto [first, again] = contributions(0, 1);
  EXPECT_EQ(again->epoch(), 4u);
  EXPECT_EQ(again->tensors()[0].data, first->tensors()[0].data);
  EXPECT_EQ(seen().first, 1);

  as_coordinator_.refuse(*again, make_error(errc::not_participant, "not in round 1"), 4);
  EXPECT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 2; })) << "no resync after not_participant";
}

}  // namespace
}  // namespace atl
