#pragma once
// The protocol tier's shared pieces (tests/*_protocol_test.cpp). Protocol tier: real actors (coordinator, keeper, workers) in one process, talking
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
#include <functional>
#include <map>
#include <mutex>
#include <set>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/decisions/round_tracker.hpp"
#include "actors/keeper/keeper.hpp"
#include "actors/shared/commit_record.hpp"
#include "actors/shared/data_pieces.hpp"
#include "actors/shared/membership_delta.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "actors/worker/worker.hpp"
#include "runtime/core/digest.hpp"
#include "storage/checkpoint_store.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/fake_replica.hpp"

namespace atl::protocol_testing {

using ::atl::testing::fake_replica;
using ::atl::testing::leasing_replica;

// How much simulated time a wait may let pass before it fails.
constexpr auto wait_limit = std::chrono::seconds(120);

// The scheduler of the running test (set by the fixture): the waits below drive it.
inline caf::scheduler::test_coordinator* simulation = nullptr;

// Runs the actors until `pred` holds: every job, then the next timer, and so on, for at
// most `limit` of simulated time. False if it never held.
template <class Pred>
inline bool run_until(Pred pred, std::chrono::milliseconds limit = wait_limit) {
  auto& sched = *simulation;
  const auto end = sched.clock().now() + limit;
  for (;;) {
    sched.run();
    if (pred()) return true;
    if (sched.clock().now() >= end || !sched.trigger_timeout()) return false;
  }
}

// Lets `span` of simulated time pass, running every job and every timer due within it.
inline void settle(std::chrono::milliseconds span) {
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
  std::uint32_t fragment = 0;  // the unit, with slices
  std::uint64_t round = 0;
  std::uint64_t digest = 0;
  std::vector<std::string> participants;
  std::uint64_t bytes = 0;
  // run.data_cursor: worker -> (the round it contributed to, its first data piece's chunk index)
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> ties;
};
struct observed_ack {
  std::string worker;
  std::uint32_t fragment = 0;  // the unit, with slices
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

inline caf::behavior probe_actor(caf::event_based_actor*, observations* obs) {
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
            observed_round r;
            r.fragment = env.getRoundReport().getFragment();
            r.round = env.getRoundReport().getRound();
            r.digest = env.getRoundReport().getDigest();
            r.bytes = env.getRoundReport().getBytes();
            for (const auto p : env.getRoundReport().getParticipants()) r.participants.push_back(p);
            for (const auto t : env.getRoundReport().getTies())
              r.ties[t.getWorker().cStr()] = {t.getRound(), read_data_pieces(t.getPieces()).at(0).chunk.index};
            obs->rounds.push_back(r);
          } else if (env.isRoundAck()) {
            const auto ack = env.getRoundAck();
            (ack.getAdopted() ? obs->adopted : obs->digests)
                .push_back({msg->sender(), ack.getFragment(), ack.getRound(), ack.getDigest()});
          } else if (!env.isMembershipRequest() && !env.isProgress() && !env.isEvalReport()) {
            obs->received.push_back(msg);
          }
        });
      },
  };
}

// The in-memory transport, recording each message as "receiver kind" (e.g. "registry
// round_report"). Ids placed elsewhere are still delivered here, but the actors are told
// they live in another process. A message the drop rule holds for is lost on the way
// (recorded as "receiver kind dropped").
class recording_transport : public memory_transport {
 public:
  using memory_transport::memory_transport;
  using drop_rule = std::function<bool(const std::string& receiver, const wire::message& msg)>;
  void send(const std::string& receiver, wire::frames frames) override {
    auto copy = frames;
    const auto msg = wire::decode(std::move(copy), wire::limits{});
    bool drop = false;
    {
      std::lock_guard<std::mutex> lock(mu_);
      drop = msg && drop_ && drop_(receiver, **msg);
      receivers_.push_back(receiver + " " + (msg ? wire::kind_name((*msg)->kind()) : "undecodable") +
                           (drop ? " dropped" : ""));
    }
    if (!drop) memory_transport::send(receiver, std::move(frames));
  }
  void drop_when(drop_rule rule) {
    std::lock_guard<std::mutex> lock(mu_);
    drop_ = std::move(rule);
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
  drop_rule drop_;
};

// A contribution of raw fp32 values (encode() would refuse the NaN a test sends on purpose).
// `pieces`: the run's data it trained on (run.data_cursor).
inline void contribute_as(mailer& as, std::uint64_t epoch, std::uint64_t round, const std::vector<float>& delta,
                          float weight = 1.0f, const std::vector<data::piece>& pieces = {}) {
  wire::outgoing out;
  auto c = out.envelope.initContribution();
  c.setFragment(0);
  c.setRound(round);
  c.setWeight(weight);
  if (!pieces.empty()) put_data_pieces(c.initData(static_cast<unsigned>(pieces.size())), pieces);
  encoded_values enc;
  enc.count = delta.size();
  enc.payload.resize(delta.size() * sizeof(float));
  std::memcpy(enc.payload.data(), delta.data(), enc.payload.size());
  put_contribution(c, std::move(enc), out);
  as.send("coord/0", epoch, out);
}

// A StateRequest; with `init`, a fresh coordinator seeds round 0 from it. `held_digest`:
// the digest of the values the sender says it holds.
// `skips_round`: the round the sender says it starts past (StateRequest.skipsRound).
inline void request_state_as(mailer& as, const std::vector<float>& init = {}, std::uint64_t held_digest = 0,
                             std::uint64_t skips_round = 0) {
  wire::outgoing req;
  req.envelope.initStateRequest().setFragment(0);
  req.envelope.getStateRequest().setHeldDigest(held_digest);
  req.envelope.getStateRequest().setSkipsRound(skips_round);
  if (!init.empty()) req.tensors.push_back(wire::tensor::from_floats(init.data(), init.size()));
  as.send("coord/0", 0, req);
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

  // Applied to every coordinator config spawn_coordinator makes (knobs it takes no argument for).
  std::function<void(coordinator_config&)> customize_coordinator;

  caf::actor spawn_coordinator(std::size_t min_workers, outer_options outer = {0.7f, 0.9f},
                               std::chrono::milliseconds round_deadline = std::chrono::milliseconds(0),
                               bool early_results = false) {
    coordinator_config cc;
    cc.min_workers = min_workers;
    cc.outer = outer;
    cc.round_deadline = round_deadline;
    cc.early_results = early_results;
    if (customize_coordinator) customize_coordinator(cc);
    auto c = sys_.spawn(coordinator_actor, static_cast<transport*>(&net_), cluster_.get(), cc);
    dir_.add("coord/0", c);
    return c;
  }

  // Workers `ids` (ranks in order) training with `run` the replicas `factory` makes (default:
  // a fake_replica of each rank).
  void spawn_fake_workers(const std::vector<std::string>& ids, const run_config& run,
                          replica_factory factory = nullptr) {
    if (!factory)
      factory = [](const run_config&, const replica_spec& s) -> std::unique_ptr<replica> {
        return std::make_unique<fake_replica>(s.rank);
      };
    for (std::uint32_t r = 0; r < ids.size(); ++r) {
      worker_config wc;
      wc.id = ids[r];
      wc.cluster_id = cluster_.get();
      wc.spec.rank = r;
      wc.spec.world_size = static_cast<std::uint32_t>(ids.size());
      wc.run = run;
      dir_.add(ids[r], sys_.spawn(worker_actor, static_cast<transport*>(&net_), wc, factory));
    }
  }

  // What the registry would send: the workers of an epoch.
  // quorum 0: the coordinator's min_workers.
  void send_membership(std::uint64_t epoch, const std::vector<std::string>& workers, std::uint32_t quorum = 0,
                       const std::vector<std::string>& keepers = {}, const std::string& to = "coord/0") {
    mailer as_registry(net_, "registry", cluster_.get());
    wire::outgoing out;
    auto m = out.envelope.initMembership();
    m.setEpoch(epoch);
    m.setQuorum(quorum);
    auto keeper_list = m.initKeepers(static_cast<unsigned>(keepers.size()));
    for (unsigned i = 0; i < keepers.size(); ++i) keeper_list.set(i, keepers[i]);
    auto list = m.initWorkers(static_cast<unsigned>(workers.size()));
    for (unsigned i = 0; i < workers.size(); ++i) list.set(i, workers[i]);
    as_registry.send(to, epoch, out);
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

  // A coordinator (outer lr 1, no momentum) whose round 1 is open to worker/x (as_worker_)
  // and worker/y, whose probe writes into `y_obs`; theta is 1, 2, 3. False if it did not open.
  bool open_round_one_with_x_and_y(observations& y_obs) {
    spawn_coordinator(1, {1.0f, 0.0f});
    send_membership(1, {"worker/x", "worker/y"});
    request_state_with({1.0f, 2.0f, 3.0f});
    if (!worker_obs_.wait_for([&] { return worker_obs_.received.size() == 1; })) return false;
    dir_.add("worker/y", sys_.spawn(probe_actor, &y_obs));
    return true;
  }

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

}  // namespace atl::protocol_testing
