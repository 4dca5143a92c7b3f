// Protocol tier (tests/support/protocol_fixture.hpp): a real worker whose coordinator is the test
// (WorkerRecoveryTest): resends, resyncs, chunked state, seeds, refusals and weights.
#include <algorithm>
#include <chrono>

#include "tests/support/protocol_fixture.hpp"
#include "tests/support/throw_point.hpp"

namespace atl {
namespace {

using namespace protocol_testing;

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

  // `data_units`: the replica's task has that many units of data, two a step (the worker
  // leases them from the run's data cursor); 0: it samples its own.
  void spawn_worker(std::int64_t result_timeout_ms, std::int64_t state_chunk_values = 1 << 20,
                    const std::string& weighting = "samples", std::uint64_t data_units = 0) {
    worker_config wc;
    wc.id = "worker/1.0";
    wc.cluster_id = cluster_.get();
    wc.run.steps = 1000;
    wc.run.sync_every = 5;
    wc.run.weighting = weighting;
    wc.run.result_timeout_ms = result_timeout_ms;
    wc.run.state_chunk_values = state_chunk_values;
    replica_factory factory = [data_units](const run_config&, const replica_spec& s) -> std::unique_ptr<replica> {
      if (data_units == 0) return std::make_unique<fake_replica>(s.rank);
      return std::make_unique<leasing_replica>(s.rank, data_units);
    };
    dir_.add(wc.id, sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
  }
  // The DataLeaseRequests the registry probe received so far.
  std::size_t lease_requests() {
    std::lock_guard<std::mutex> lock(obs_.mu);
    return static_cast<std::size_t>(std::count_if(obs_.received.begin(), obs_.received.end(),
                                                  [](const auto& m) { return m->envelope().isDataLeaseRequest(); }));
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

// run.data_cursor at the worker: it leases before its first step, each contribution carries
// the positions of the steps it covers, and a lease refused as invalid_config (its data is
// not the run's) stops the worker, as a restart would meet the same refusal.
TEST_F(WorkerRecoveryTest, AContributionCarriesItsDataAndARefusedViewOfTheDataStopsTheWorker) {
  spawn_worker(60000, 1 << 20, "samples", 1000);
  bool stopped = false;
  // Held for the test's length: an actor nothing refers to is gone (unreachable).
  const auto watcher =
      sys_.spawn([&stopped, w = dir_.find("worker/1.0")](caf::event_based_actor* self) -> caf::behavior {
        self->monitor(w);
        self->set_down_handler([&stopped](const caf::down_msg&) { stopped = true; });
        return {[](int) {}};
      });
  ASSERT_TRUE(obs_.wait_for([&] { return lease_requests() == 1; }));
  mailer as_registry(net_, "registry", cluster_.get());
  wire::outgoing lease;
  auto l = lease.envelope.initDataLease();
  l.setEpoch(0);
  l.setIndex(3);
  l.setBegin(30);
  l.setEnd(40);  // a chunk is H = 5 steps of 2 units
  l.setSeed(7);
  as_registry.send("worker/1.0", 1, lease);
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; }));
  const auto [first, also_first] = contributions(0, 0);
  const auto pieces = read_data_pieces(first->envelope().getContribution().getData());
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_TRUE((pieces[0] == data::piece{{0, 3}, {30, 40}})) << "the five steps' units of chunk 3";

  ASSERT_TRUE(obs_.wait_for([&] { return lease_requests() >= 2; })) << "the next chunk asked for ahead";
  EXPECT_FALSE(stopped);
  wire::outgoing refusal;
  auto r = refusal.envelope.initRefusal();
  r.setCode(static_cast<std::uint16_t>(errc::invalid_config));
  r.setMessage("worker/1.0 sees 1000 units in chunks of 10; the run's data has 999 in chunks of 10");
  as_registry.send("worker/1.0", 1, refusal);
  ASSERT_TRUE(obs_.wait_for([&] { return stopped; })) << "the worker stops with the registry's reason";
  caf::anon_send_exit(watcher, caf::exit_reason::user_shutdown);
}

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

// No message may kill an actor (actors/shared/guarded_handler.hpp): the state its handler
// threw on is refused as unreadable, counted, and the worker takes the same state sent again.
TEST_F(WorkerRecoveryTest, AHandlerThatThrowsRefusesItsMessageAndTheWorkerGoesOn) {
  ATL_SKIP_WITHOUT_THROW_POINTS();
  spawn_worker(60000);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.received.size() >= 1; }));
  const testing::armed_throw_point armed("worker.handler");
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return coord_obs_.refusals.size() == 1; }));
  EXPECT_EQ(coord_obs_.refusals[0], errc::malformed_frame);
  EXPECT_EQ(net_.counters().refused[static_cast<std::size_t>(errc::malformed_frame)].load(), 1u);
  EXPECT_EQ(seen().second, 0) << "the state it threw on was not taken";
  send_state(0);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().second >= 1; })) << "the worker did not go on";
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

// A sharded worker (one fragment in two slices, units coord/0 and coord/1) joining a run,
// whose coordinators are probes.
class SlicedJoinerTest : public WorkerRecoveryTest {
 protected:
  static constexpr std::size_t values = 2 * 16384;  // two slices of one outer-step block each

  SlicedJoinerTest() : as_slice1_(net_, "coord/1", "cluster-test") {
    dir_.add("coord/1", sys_.spawn(probe_actor, &slice1_obs_));
  }
  ~SlicedJoinerTest() override { stop_actors(); }  // before slice1_obs_ goes

  // `step_time`: how long each of its steps takes.
  void spawn_joiner(std::chrono::milliseconds step_time = std::chrono::milliseconds(0)) {
    worker_config wc;
    wc.id = "worker/1.0";
    wc.cluster_id = cluster_.get();
    wc.run.steps = 1000;
    wc.run.sync_every = 5;
    wc.run.shards = 2;
    wc.run.warm_start = false;
    replica_factory factory = [step_time](const run_config&, const replica_spec& s) -> std::unique_ptr<replica> {
      return std::make_unique<slow_replica>(s.rank, step_time);
    };
    dir_.add(wc.id, sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
    ASSERT_TRUE(coord_obs_.wait_for([&] { return seen_locked().first >= 1; }));
    ASSERT_TRUE(slice1_obs_.wait_for([&] { return !slice1_obs_.received.empty(); }));
  }
  // Slice `unit`'s committed state at `round`, from its coordinator.
  void state_of_slice(std::uint32_t unit, std::uint64_t round) {
    fake_replica initial(0, 1, nullptr, values);
    std::vector<float> whole(values);
    initial.read_fragment(0, whole.data());
    wire::outgoing out;
    auto fs = out.envelope.initFragmentState();
    fs.setFragment(unit);
    fs.setRound(round);
    out.tensors.push_back(wire::tensor::from_floats(whole.data() + unit * (values / 2), values / 2));
    (unit == 0 ? as_coordinator_ : as_slice1_).send("worker/1.0", 1, out);
  }
  // StateRequests that say the worker skips `round`; whether its first Contribution is to
  // `round`.
  static std::size_t skips_of(const observations& obs, std::uint64_t round) {
    return static_cast<std::size_t>(std::count_if(obs.received.begin(), obs.received.end(), [&](const auto& m) {
      return m->envelope().isStateRequest() && m->envelope().getStateRequest().getSkipsRound() == round;
    }));
  }
  static bool contributed_round(const observations& obs, std::uint64_t round) {
    for (const auto& m : obs.received)
      if (m->envelope().isContribution()) return m->envelope().getContribution().getRound() == round;
    return false;
  }

  // The fake replica, each step taking `step_time` of simulated time (its timers, such as
  // the worker's tick, fire during the step).
  class slow_replica : public fake_replica {
   public:
    slow_replica(std::uint32_t rank, std::chrono::milliseconds step_time)
        : fake_replica(rank, 1, nullptr, values), step_time_(step_time) {}
    step_result train_step(std::int64_t step) override {
      if (step_time_.count() > 0) simulation->clock().advance_time(step_time_);
      return fake_replica::train_step(step);
    }

   private:
    std::chrono::milliseconds step_time_;
  };

  observations slice1_obs_;
  mailer as_slice1_;
};

// A joiner between two slices' rounds: given slice 0 at round 1 and slice 1 at round 2, as
// when slice 0's coordinator was re-placed a round behind. It starts at round 2's step, past
// slice 0's round 2, and says so at once (StateRequest.skipsRound = 2) instead of leaving that
// round to wait for a contribution it will never send; slice 0's state of round 2 brings it
// level, and it then contributes round 3 to both slices.
TEST_F(SlicedJoinerTest, AJoinerWhoseSlicesAreARoundApartSaysWhichRoundItSkips) {
  spawn_joiner();
  state_of_slice(1, 2);
  state_of_slice(0, 1);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return skips_of(coord_obs_, 2) >= 1; }))
      << "slice 0's coordinator was not told the joiner skips round 2";
  EXPECT_EQ(seen().second, 0) << "it trained before slice 0 was level";

  state_of_slice(0, 2);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return contributed_round(coord_obs_, 3); })) << "slice 0";
  ASSERT_TRUE(slice1_obs_.wait_for([&] { return contributed_round(slice1_obs_, 3); })) << "slice 1";
}

// The worker's tick says the skip again: slice 0's older state adopted a second time while
// the first skip was on its way (a re-placed coordinator's announcement) is not said again
// at once (a worker names a round at most once per state_retry, 2 s), and the worker trains
// on, a round behind on slice 0. Its tick, once 2 s passed, names round 2 again, long
// before the slow steps reach the next sync point (where it would contribute to slice 0
// the round it already skipped).
TEST_F(SlicedJoinerTest, TheTickSaysASkipAgainThatAnAdoptedStateLeftUnsaid) {
  spawn_joiner(std::chrono::milliseconds(2000));  // the next sync point 10 s away
  state_of_slice(1, 2);
  state_of_slice(0, 1);
  ASSERT_TRUE(coord_obs_.wait_for([&] { return skips_of(coord_obs_, 2) >= 1; }));
  state_of_slice(0, 1);  // the announcement, adopted: the skip is not said again yet
  ASSERT_TRUE(run_until([&] { return skips_of(coord_obs_, 2) >= 2 || contributed_round(coord_obs_, 2); },
                        std::chrono::seconds(30)))
      << "neither a skip nor a contribution";
  // The second skip came first: nothing it sent slice 0 before it was a contribution.
  std::lock_guard<std::mutex> lock(coord_obs_.mu);
  std::size_t skips = 0;
  for (const auto& m : coord_obs_.received) {
    ASSERT_FALSE(m->envelope().isContribution()) << "it reached the sync point of the round it skips first";
    if (m->envelope().isStateRequest() && m->envelope().getStateRequest().getSkipsRound() == 2 && ++skips == 2) break;
  }
  EXPECT_EQ(skips, 2u) << "the tick did not say the skip again";
}

}  // namespace
}  // namespace atl
