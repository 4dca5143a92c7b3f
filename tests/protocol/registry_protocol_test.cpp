// Protocol tier: the real registry actor on CAF's deterministic scheduler with simulated
// time. Two stand-in node agents register, heartbeat and fall silent; the test reads what
// the registry sends (Welcome, PlaceCoordinator, Membership, Refusal) and what it stores.
// No thread, no sleep: leases run out because the test advances the simulated clock.
#include <array>
#include <optional>
#include <set>

#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/decisions/run_phase.hpp"
#include "actors/registry/nodes.hpp"
#include "actors/registry/registry.hpp"
#include "actors/shared/data_pieces.hpp"
#include "actors/shared/membership_delta.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/transport/route_delta.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/registry_store.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/refusing_store.hpp"
#include "tests/support/registry_testing.hpp"
#include "tests/support/throw_point.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

using testing::recorder;

class RegistryProtocol : public ::testing::Test {
 protected:
  RegistryProtocol() : sys_(testing::deterministic(cfg_)), sched_(testing::test_scheduler(sys_)) {}

  void SetUp() override {
    run_config run;
    run.min_workers = 2;
    run.fragments = 2;
    run.heartbeat_ms = 250;
    run.lease_ms = 1000;
    run.handover_ms = 3000;
    adjust(run);
    registry_snapshot snap;
    snap.cluster_id = "cluster-registry";
    snap.config_toml = to_toml(run);
    const auto probe = sys_.spawn(recorder, &seen_);
    for (const auto* id :
         {"node/pending-a", "node/pending-b", "node/pending-c", "node/pending-d", "node/1", "node/2", "node/3",
          "node/4", "coord/0", "coord/1", "coord/2", "coord/3", "keeper/3", "ctl/t", "worker/1.0", "worker/2.0"})
      dir_.add(id, probe);
    deps_ = testing::in_process_registry(net_, store_, checkpoints_, dir_, "inproc://test");
    deps_.stop_when_unsaved = fenced();
    dir_.add(registry_id(), sys_.spawn(registry_actor, deps_, snap));
    sched_.run();
  }

  // A head restart: the registry stops and a new one starts from what the store holds.
  void restart_registry() {
    caf::anon_send_exit(dir_.find(registry_id()), caf::exit_reason::user_shutdown);
    sched_.run();
    dir_.remove(registry_id());
    dir_.add(registry_id(), sys_.spawn(registry_actor, deps_, stored()));
    sched_.run();
  }

  void TearDown() override {
    for (const auto& id : dir_.ids()) caf::anon_send_exit(dir_.find(id), caf::exit_reason::user_shutdown);
    dir_.clear();
    // The lease proxies outlive the registry until their leases run out unrenewed: let
    // simulated time pass so the actor system can shut down.
    run_for(2s, {});
    sched_.run();
  }

  virtual void adjust(run_config&) {}  // a derived fixture's run
  virtual bool fenced() const { return false; }  // a derived fixture's store is an election's

  void hello(const std::string& from, bool can_keep = false, const std::string& model_signature = "",
             bool then_admit = true) {
    mailer mail(net_, from, "");
    wire::outgoing out;
    auto h = out.envelope.initHello();
    h.initDevices(1).set(0, "cpu");
    h.setHostname("island");
    h.setCanKeep(can_keep);
    h.setModelSignature(model_signature);
    mail.send(registry_id(), 0, out);
    if (then_admit) admit();
    else sched_.run();
  }

  // New nodes are admitted together within admission_gap of the first Hello
  // (actors/registry/nodes.cpp): the jobs run, and the timers due within 60 ms fire.
  void admit() {
    const auto end = sched_.clock().now() + 60ms;
    for (;;) {
      sched_.run();
      const auto& timers = sched_.clock().schedule();
      if (timers.empty() || timers.begin()->first > end) break;
      sched_.trigger_timeout();
    }
  }

  // A Hello as the link authenticated it: `key` is what a CURVE ingress would attach.
  void keyed_hello(const std::string& from, std::uint32_t node, const std::string& key, const std::string& endpoint) {
    wire::outgoing out;
    out.envelope.setClusterId(node ? "cluster-registry" : "");
    out.envelope.setSender(from);
    out.envelope.setReceiver(registry_id());
    out.envelope.setSeq(1);
    auto h = out.envelope.initHello();
    h.setNodeId(node);
    h.initDevices(1).set(0, "cpu");
    h.setHostname("island");
    h.setDataEndpoint(endpoint);
    auto msg = wire::decode(wire::encode(out), wire::limits{}, key);
    ASSERT_TRUE(msg) << msg.err().describe();
    caf::anon_send(dir_.find(registry_id()), *msg);
    admit();
  }

  // A heartbeat of `node`, holding the PeerTable of `routes_epoch` with `routes_digest`.
  void heartbeat(std::uint32_t node, std::uint64_t routes_epoch = 0, std::uint64_t routes_digest = 0) {
    mailer mail(net_, node_actor_id(node), "cluster-registry");
    wire::outgoing out;
    auto hb = out.envelope.initHeartbeat();
    hb.setNodeId(node);
    hb.setRoutesEpoch(routes_epoch);
    hb.setRoutesDigest(routes_digest);
    mail.send(registry_id(), 0, out);
  }

  // Advances simulated time by `span`, heartbeating for `alive` nodes every 250 ms.
  void run_for(std::chrono::milliseconds span, const std::vector<std::uint32_t>& alive) {
    const auto end = sched_.clock().now() + span;
    auto next_beat = sched_.clock().now();
    while (sched_.clock().now() < end) {
      if (sched_.clock().now() >= next_beat) {
        for (auto n : alive) heartbeat(n);
        next_beat = sched_.clock().now() + 250ms;
      }
      if (sched_.has_job()) sched_.run_once();
      else if (!sched_.trigger_timeout()) break;
    }
  }

  // Sends what `fill` puts into an envelope, as `id`, in the run's epoch.
  template <class Fill>
  void send_as(const std::string& id, Fill fill) {
    mailer mail(net_, id, "cluster-registry");
    wire::outgoing out;
    fill(out.envelope);
    mail.send(registry_id(), stored().epoch, out);
    sched_.run();
  }

  // `coordinator` (of unit `unit`) says its round `round` is open, holding no Membership.
  void progress_of(const std::string& coordinator, std::uint32_t unit, std::uint64_t round) {
    send_as(coordinator, [&](schema::Envelope::Builder e) {
      auto p = e.initRoundProgress();
      p.setFragment(unit);
      p.setRound(round);
      p.setPhase("collecting");
    });
  }

  // An atollctl command sent as ctl/t; what comes back is in seen_, cleared first.
  void send_control(const char* command, const char* argument = "") {
    seen_.clear();
    mailer mail(net_, "ctl/t", "");
    wire::outgoing out;
    auto c = out.envelope.initControlRequest();
    c.setCommand(command);
    c.setArgument(argument);
    mail.send(registry_id(), 0, out);
    sched_.run();
  }

  // An atollctl command: (ok, the reply's JSON).
  std::pair<bool, std::string> ask(const char* command, const char* argument = "") {
    send_control(command, argument);
    const auto replies = take(schema::Envelope::CONTROL_REPLY, "ctl/t");
    EXPECT_EQ(replies.size(), 1u) << command;
    if (replies.empty()) return {false, {}};
    const auto reply = replies[0]->envelope().getControlReply();
    return {reply.getOk(), reply.getJson().cStr()};
  }

  std::vector<wire::message_ptr> take(schema::Envelope::Which kind, const std::string& to) {
    std::vector<wire::message_ptr> out;
    for (const auto& m : seen_)
      if (m->kind() == kind && m->receiver() == to) out.push_back(m);
    return out;
  }

  // The table node `to` holds after the PeerTables it was sent since seen_ was last
  // cleared, in order (runtime/transport/route_delta.hpp); a gap fails the test.
  route_table table_held_by(const std::string& to) {
    held_routes held;
    for (const auto& m : take(schema::Envelope::PEER_TABLE, to))
      EXPECT_EQ(held.apply(read_route_delta(m->envelope().getPeerTable())), route_verdict::applied)
          << "a gap in the tables sent to " << to;
    return held.table();
  }

  registry_snapshot stored() {
    auto snap = store_.load();
    EXPECT_TRUE(snap && *snap);
    return snap && *snap ? **snap : registry_snapshot{};
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  registry_deps deps_;
  directory dir_;
  cluster_identity cluster_{"cluster-registry"};
  memory_transport net_{dir_, cluster_};
  // The registry's store, which refuses every commit while told to (an etcd store whose
  // writer's term has ended).
  testing::refusing_store registry_db_{errc::stale_epoch, "another head leads"};
  std::unique_ptr<kv_store> checkpoint_db_ = make_memory_store();
  registry_store store_{registry_db_};
  checkpoint_store checkpoints_{*checkpoint_db_, 10};
  std::vector<wire::message_ptr> seen_;
};

// Every node dies at once (a head restart that both nodes' heartbeats miss, as the Slurm
// test saw): their deaths can place the coordinators nowhere. A node that joins then gets
// them, or no round would ever run again.
TEST_F(RegistryProtocol, CoordinatorsLeftWithoutAHostWhenEveryNodeDiedGoToTheNextNodeThatJoins) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().placements, (std::vector<std::string>{"node/1", "node/2"}));
  run_for(2s, {});  // both fall silent past their leases
  auto snap = stored();
  ASSERT_EQ(snap.members.size(), 2u);
  EXPECT_EQ(snap.members[0].state, "dead");
  EXPECT_EQ(snap.members[1].state, "dead");
  for (const auto& host : snap.placements)  // the last to die could take none: no live node
    EXPECT_TRUE(host == "node/1" || host == "node/2") << host;
  seen_.clear();
  hello("node/pending-c");
  EXPECT_EQ(stored().placements, (std::vector<std::string>{"node/3", "node/3"}));
  std::set<std::uint32_t> placed;
  for (const auto& m : take(E::PLACE_COORDINATOR, "node/3"))
    placed.insert(m->envelope().getPlaceCoordinator().getFragment());
  EXPECT_EQ(placed, (std::set<std::uint32_t>{0, 1})) << "both coordinators placed on the joiner";
}

TEST_F(RegistryProtocol, NodesJoinTrainingStartsAndALeaseRunningOutReplacesTheCoordinator) {
  using E = schema::Envelope;
  hello("node/pending-a");
  ASSERT_EQ(take(E::WELCOME, "node/pending-a").size(), 1u);
  EXPECT_EQ(take(E::WELCOME, "node/pending-a")[0]->envelope().getWelcome().getNodeId(), 1u);
  EXPECT_EQ(stored().run_state, "waiting") << "one worker of min_workers 2";
  hello("node/pending-b");
  EXPECT_EQ(stored().run_state, "training");
  ASSERT_EQ(take(E::PLACE_COORDINATOR, "node/1").size(), 1u);
  ASSERT_EQ(take(E::PLACE_COORDINATOR, "node/2").size(), 1u);
  EXPECT_EQ(take(E::PLACE_COORDINATOR, "node/2")[0]->envelope().getPlaceCoordinator().getFragment(), 1u);
  EXPECT_EQ(stored().placements, (std::vector<std::string>{"node/1", "node/2"}));
  const auto epoch_with_both = stored().epoch;

  // Both heartbeat for a while: nothing changes. coord/0 has its Membership; once it holds
  // it, nothing more is sent while nothing changes (no version check each tick).
  run_for(2s, {1, 2});
  EXPECT_EQ(stored().epoch, epoch_with_both);
  const auto memberships = take(E::MEMBERSHIP, "coord/0");
  ASSERT_GE(memberships.size(), 1u);
  held_membership coord0;  // coord/0's Membership, as the messages build it
  for (const auto& m : memberships) {
    EXPECT_NE(coord0.apply(read_membership(m->envelope().getMembership())), held_membership::verdict::needs_whole);
  }
  EXPECT_EQ(coord0.view().workers.size(), 2u);
  seen_.clear();
  run_for(2s, {1, 2});
  EXPECT_TRUE(take(E::MEMBERSHIP, "coord/0").empty()) << "nothing changed, and coord/0 holds it";

  // Its RoundProgress names the Membership it holds: nothing; another one (a delta lost):
  // a version check, with which it asks for the whole (actors/shared/membership_delta.hpp).
  const auto progress_naming = [&](std::uint64_t epoch, std::uint64_t digest) {
    send_as("coord/0", [&](schema::Envelope::Builder e) {
      auto p = e.initRoundProgress();
      p.setFragment(0);
      p.setPhase("collecting");
      p.setMembershipEpoch(epoch);
      p.setMembershipDigest(digest);
    });
  };
  progress_naming(coord0.view().epoch, coord0.digest());
  EXPECT_TRUE(take(E::MEMBERSHIP, "coord/0").empty()) << "it holds the one published";
  progress_naming(coord0.view().epoch - 1, 0);
  const auto check = take(E::MEMBERSHIP, "coord/0");
  ASSERT_EQ(check.size(), 1u);
  const auto last = read_membership(check[0]->envelope().getMembership());
  EXPECT_TRUE(last.delta && last.view.workers.empty() && last.removed.empty()) << "not a version check";
  EXPECT_EQ(coord0.apply(last), held_membership::verdict::unchanged) << "what it holds is current";

  // Node 2 falls silent: after its lease it is dead, the epoch grows, fragment 1's
  // coordinator moves to node 1, and the Membership names node 1's worker alone.
  seen_.clear();
  run_for(2s, {1});
  const auto snap = stored();
  EXPECT_GT(snap.epoch, epoch_with_both);
  ASSERT_EQ(snap.members.size(), 2u);
  EXPECT_EQ(snap.members[1].state, "dead");
  EXPECT_EQ(snap.placements, (std::vector<std::string>{"node/1", "node/1"}));
  bool placed_again = false;
  for (const auto& m : take(E::PLACE_COORDINATOR, "node/1"))
    placed_again = placed_again || m->envelope().getPlaceCoordinator().getFragment() == 1;
  EXPECT_TRUE(placed_again);
  const auto after = take(E::MEMBERSHIP, "coord/0");
  ASSERT_FALSE(after.empty());
  for (const auto& m : after) {
    EXPECT_NE(coord0.apply(read_membership(m->envelope().getMembership())), held_membership::verdict::needs_whole);
  }
  EXPECT_EQ(coord0.view().workers, std::vector<std::string>{"worker/1.0"});

  // Its heartbeat after the lease is refused (stale_epoch): it must register again.
  seen_.clear();
  heartbeat(2);
  sched_.run();
  const auto refusals = take(E::REFUSAL, "node/2");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::stale_epoch);
}

// A node's closed connection (what the head's transport reports when a process dies)
// makes it a suspect: the registry asks it for a heartbeat, and declares it dead when
// cluster.confirm_ms (500 ms) passes without one, long before its lease (1000 ms here,
// 20 s by default). A node that answers stays.
// A node repeats its Hello each second until its Welcome comes. A head too slow to answer
// within the second (a thousand nodes joining) must welcome the repeat as the same node;
// once the node has its id, its provisional id is free again.
TEST_F(RegistryProtocol, AHelloRepeatedBeforeItsWelcomeArrivedIsTheSameNode) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-a");  // the Welcome was still on its way
  const auto welcomes = take(E::WELCOME, "node/pending-a");
  ASSERT_EQ(welcomes.size(), 2u);
  EXPECT_EQ(welcomes[0]->envelope().getWelcome().getNodeId(), 1u);
  EXPECT_EQ(welcomes[1]->envelope().getWelcome().getNodeId(), 1u) << "the repeat became another node";
  EXPECT_EQ(stored().members.size(), 1u);

  heartbeat(1);  // node 1 took its id
  seen_.clear();
  hello("node/pending-a");  // the same provisional id from another node (it rejoined, say)
  const auto again = take(E::WELCOME, "node/pending-a");
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]->envelope().getWelcome().getNodeId(), 2u);
  EXPECT_EQ(stored().members.size(), 2u);
}

// Nodes that say Hello together (a thousand starting at once) are admitted together within
// admission_gap: one epoch and one write for the burst. None is welcomed, or published,
// before it is on disk, and a Hello repeated meanwhile is still the same node.
TEST_F(RegistryProtocol, NodesThatSayHelloTogetherAreAdmittedAsOneEpoch) {
  using E = schema::Envelope;
  for (const char* node : {"node/pending-a", "node/pending-b", "node/pending-c", "node/pending-b"})
    hello(node, false, "", false);
  EXPECT_TRUE(take(E::WELCOME, "node/pending-a").empty()) << "welcomed before it was on disk";
  EXPECT_TRUE(take(E::PEER_TABLE, "node/1").empty()) << "published before it was on disk";
  auto nothing_yet = store_.load();
  ASSERT_TRUE(nothing_yet);
  EXPECT_FALSE(*nothing_yet) << "saved before the admission";
  admit();
  EXPECT_EQ(stored().epoch, 1u) << "three nodes, one epoch";
  EXPECT_EQ(stored().members.size(), 3u) << "the repeated Hello became another node";
  std::uint32_t id = 0;
  for (const char* node : {"node/pending-a", "node/pending-b", "node/pending-c"}) {
    const auto welcomes = take(E::WELCOME, node);
    ASSERT_EQ(welcomes.size(), 1u) << node;
    EXPECT_EQ(welcomes[0]->envelope().getWelcome().getNodeId(), ++id);
  }
}

// More Hellos than an admission takes (its save must fit one etcd transaction): the rest
// are admitted right after, as the next epoch.
TEST_F(RegistryProtocol, ABurstLargerThanAnAdmissionIsAdmittedInTurns) {
  const std::size_t burst = registry_detail::max_admitted_at_once + 20;
  for (std::size_t i = 0; i + 1 < burst; ++i) hello("node/burst-" + std::to_string(i), false, "", false);
  hello("node/pending-d", false, "", false);  // the last, recorded here
  admit();
  EXPECT_EQ(stored().members.size(), burst);
  EXPECT_EQ(stored().epoch, 2u) << "two admissions";
  EXPECT_EQ(take(schema::Envelope::WELCOME, "node/pending-d").size(), 1u);
}

TEST_F(RegistryProtocol, ANodeWhoseConnectionClosedIsDeadUnlessItAnswersWithinConfirm) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  run_for(1s, {1, 2});
  const auto epoch_with_both = stored().epoch;
  const auto registry = dir_.find(registry_id());

  // Node 1's connection closes but node 1 answers (a link that came back): nothing changes.
  seen_.clear();
  caf::anon_send(registry, link_lost_atom::value, std::string("node/1"));
  sched_.run();
  ASSERT_EQ(take(E::HEARTBEAT_REQUEST, "node/1").size(), 1u);
  heartbeat(1);
  run_for(2s, {1, 2});
  EXPECT_EQ(stored().epoch, epoch_with_both);
  EXPECT_EQ(stored().members[0].state, "active");

  // Node 2's closes and node 2 is silent from then on (a killed process).
  seen_.clear();
  caf::anon_send(registry, link_lost_atom::value, std::string("node/2"));
  sched_.run();
  ASSERT_EQ(take(E::HEARTBEAT_REQUEST, "node/2").size(), 1u);
  const auto closed_at = sched_.clock().now();
  run_for(300ms, {1});
  EXPECT_EQ(stored().members[1].state, "active") << "within the confirm window";
  while (stored().members[1].state == "active" && sched_.clock().now() - closed_at < 2s) run_for(50ms, {1});
  EXPECT_EQ(stored().members[1].state, "dead");
  EXPECT_LT(sched_.clock().now() - closed_at, 800ms) << "dead at the confirm window's end, not at the lease";
  EXPECT_GT(stored().epoch, epoch_with_both);
  EXPECT_EQ(stored().members[0].state, "active");

  // A closed connection of a node that is not a member, or not a node, changes nothing.
  caf::anon_send(registry, link_lost_atom::value, std::string("node/9"));
  caf::anon_send(registry, link_lost_atom::value, std::string("ctl/t"));
  sched_.run();
  EXPECT_EQ(stored().members[0].state, "active");
}

TEST_F(RegistryProtocol, ANodeWhoseModelIsNotTheRunsIsRefusedAndGetsNoSlot) {
  using E = schema::Envelope;
  wire::outgoing out;
  auto h = out.envelope.initHello();
  h.initDevices(1).set(0, "cpu");
  h.setModelDigest("00000000deadbeef");  // this run trains the built-in example, no model file
  mailer(net_, "node/pending-a", "").send(registry_id(), 0, out);
  sched_.run();
  const auto refusals = take(E::REFUSAL, "node/pending-a");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::model_mismatch);
  EXPECT_TRUE(take(E::WELCOME, "node/pending-a").empty());
  auto snap = store_.load();
  ASSERT_TRUE(snap);
  EXPECT_TRUE(!*snap || (*snap)->members.empty()) << "no member was recorded";
  hello("node/pending-b");  // the same Hello without a model is welcomed
  EXPECT_EQ(take(E::WELCOME, "node/pending-b").size(), 1u);
}

// A run whose model is its nodes' own (the Python API): the head holds no model.
// A registry whose store is fenced by an election (heads that fail over): once a save is
// refused (its term ended), it says nothing more, not even what the same change would
// have sent, and stops, so no head publishes an epoch a successor does not know.
class FencedRegistryProtocol : public RegistryProtocol {
  bool fenced() const override { return true; }
};

TEST_F(FencedRegistryProtocol, ARegistryWhoseSaveIsRefusedFallsSilentAndStops) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().run_state, "training");
  const auto epoch = stored().epoch;
  run_for(1s, {1, 2});
  ASSERT_FALSE(take(E::MEMBERSHIP, "coord/0").empty()) << "it directs while its saves are taken";

  registry_db_.refuse = true;  // another head leads now
  seen_.clear();
  run_for(2s, {1});  // node 2's lease runs out: a new epoch that cannot be saved
  // Memberships and placements repeat every tick until then; none tells of the new epoch.
  for (const auto& m : take(E::MEMBERSHIP, "coord/0"))
    EXPECT_EQ(m->envelope().getMembership().getEpoch(), epoch) << "no Membership of the epoch it could not save";
  for (const auto& m : take(E::PLACE_COORDINATOR, "node/1"))
    EXPECT_EQ(m->envelope().getPlaceCoordinator().getFragment(), 0u) << "fragment 1's coordinator is not re-placed";
  registry_db_.refuse = false;
  EXPECT_EQ(stored().epoch, epoch) << "the store kept what the last leader saved";
  send_control("status");
  EXPECT_TRUE(take(E::CONTROL_REPLY, "ctl/t").empty()) << "the registry has stopped";
}

// The run's data cursor at the head (actors/registry/cursor.cpp): workers lease chunks, tie
// their contributions to them, RoundReports consume them; a dead worker's chunk returns to
// the pool and is leased again; a restarted head resumes from the store.
TEST_F(RegistryProtocol, TheDataCursorLeasesTiesConsumesAndReturnsAcrossAHeadRestart) {
  using E = schema::Envelope;
  const auto refusal_code = [&](const char* to) {
    const auto refusals = take(E::REFUSAL, to);
    EXPECT_EQ(refusals.size(), 1u) << to;
    return refusals.empty() ? errc::none : static_cast<errc>(refusals.back()->envelope().getRefusal().getCode());
  };
  const auto lease = [&](const char* worker, std::uint64_t units = 100, std::uint64_t chunk = 10) {
    seen_.clear();
    send_as(worker, [&](auto e) {
      auto r = e.initDataLeaseRequest();
      r.setUnits(units);
      r.setChunk(chunk);
    });
    const auto leases = take(E::DATA_LEASE, worker);
    return leases.empty()
               ? std::optional<std::array<std::uint64_t, 4>>{}
               : std::array<std::uint64_t, 4>{
                     leases[0]->envelope().getDataLease().getEpoch(), leases[0]->envelope().getDataLease().getIndex(),
                     leases[0]->envelope().getDataLease().getBegin(), leases[0]->envelope().getDataLease().getEnd()};
  };
  const auto tie = [&](const char* worker, std::uint32_t fragment, std::uint64_t round, std::uint64_t index,
                       std::uint64_t begin, std::uint64_t end) {
    seen_.clear();
    send_as(worker, [&](auto e) {
      auto t = e.initDataTie();
      t.setFragment(fragment);
      t.setRound(round);
      auto p = t.initPieces(1)[0];
      p.setEpoch(0);
      p.setIndex(index);
      p.setBegin(begin);
      p.setEnd(end);
    });
  };
  // A round of `fragment` that took `participant`'s contribution, opened at `epoch`.
  const auto report = [&](std::uint32_t fragment, std::uint64_t round, const char* participant,
                          std::uint64_t epoch = 0) {
    send_as(coordinator_id(fragment), [&](auto e) {
      auto r = e.initRoundReport();
      r.setFragment(fragment);
      r.setRound(round);
      r.setEpoch(epoch);
      r.initParticipants(1).set(0, participant);
    });
  };
  const auto data = [&] {
    const auto [ok, body] = ask("data");
    EXPECT_TRUE(ok);
    return nlohmann::json::parse(body);
  };

  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().run_state, "training");
  auto view = data();
  EXPECT_FALSE(view["leasing"].get<bool>());
  for (const auto* key : {"epoch", "units", "consumed", "in_flight", "returned", "epoch_limit", "epochs_completed"})
    EXPECT_TRUE(view.contains(key)) << key << ": the same keys before any lease";
  EXPECT_FALSE(view.contains("epochs")) << "the bound is epoch_limit: `epochs` read as the epochs done";
  EXPECT_EQ(view["epochs_completed"], 0);

  // The first lease sets the run's data: 100 units, 10 a chunk; chunks go out in order.
  using chunk = std::array<std::uint64_t, 4>;  // epoch, index, begin, end
  EXPECT_EQ(lease("worker/1.0"), (chunk{0, 0, 0, 10}));
  EXPECT_EQ(lease("worker/2.0"), (chunk{0, 1, 10, 20}));
  EXPECT_FALSE(lease("worker/2.0", 99)) << "another view of the data";
  EXPECT_EQ(refusal_code("worker/2.0"), errc::invalid_config);
  EXPECT_FALSE(lease("worker/9.0")) << "not a registered worker";

  // worker/1.0's contributions to both fragments' round 1 cover its chunk; both commit.
  tie("worker/1.0", 0, 1, 0, 0, 10);
  tie("worker/1.0", 1, 1, 0, 0, 10);
  EXPECT_TRUE(take(E::REFUSAL, "worker/1.0").empty());
  tie("worker/1.0", 0, 1, 1, 10, 20);
  EXPECT_EQ(refusal_code("worker/1.0"), errc::not_participant) << "worker/2.0's chunk";
  report(0, 1, "worker/1.0");
  report(1, 1, "worker/1.0");
  view = data();
  EXPECT_TRUE(view["leasing"].get<bool>());
  EXPECT_EQ(view["units"], 100);
  EXPECT_EQ(view["consumed"], 10) << view.dump();
  EXPECT_EQ(view["in_flight"], 10) << "worker/2.0's chunk";
  ASSERT_EQ(view["chunks"].size(), 1u);
  EXPECT_EQ(view["chunks"][0]["holder"], "worker/2.0");

  // A head restart resumes the cursor from the store.
  restart_registry();
  run_for(500ms, {1, 2});
  view = data();
  EXPECT_EQ(view["consumed"], 10) << view.dump();
  EXPECT_EQ(view["in_flight"], 10);
  EXPECT_EQ(lease("worker/1.0"), (chunk{0, 2, 20, 30})) << "the next fresh chunk, not one leased before";

  // worker/2.0's node dies with its chunk unused. The chunk waits until each fragment has
  // committed a round opened after the death (a report on its way could still tie its
  // work), then returns, and is leased next.
  run_for(2s, {1});
  ASSERT_EQ(stored().members[1].state, "dead");
  EXPECT_EQ(data()["returned"], 0) << "no round opened after the death has committed yet";
  report(0, 2, "worker/1.0", stored().epoch);
  EXPECT_EQ(data()["returned"], 0) << "fragment 1 has not";
  report(1, 2, "worker/1.0", stored().epoch);
  view = data();
  EXPECT_EQ(view["returned"], 10) << view.dump();
  EXPECT_EQ(view["in_flight"], 10) << "worker/1.0's chunk 2";
  EXPECT_EQ(lease("worker/1.0"), (chunk{0, 1, 10, 20})) << "a returned chunk before a fresh one";
  EXPECT_EQ(data()["returned"], 0);
}

// A contribution the round left out (a deadline, diloco.late_work): its tie waits for the
// next round, which may take it late; once neither took it, no fragment learned the chunk
// and it goes back whole, to be leased again.
TEST_F(RegistryProtocol, ATieNoRoundTookIsLostAndItsChunkGoesBackWhole) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  send_as("worker/2.0", [](auto e) {
    auto r = e.initDataLeaseRequest();
    r.setUnits(40);
    r.setChunk(10);
  });
  ASSERT_EQ(take(E::DATA_LEASE, "worker/2.0").size(), 1u);
  for (std::uint32_t fragment : {0u, 1u})
    send_as("worker/2.0", [&](auto e) {
      auto t = e.initDataTie();
      t.setFragment(fragment);
      t.setRound(3);
      auto p = t.initPieces(1)[0];
      p.setIndex(0);
      p.setEnd(10);
    });
  // Rounds 3 and 4 of both fragments close without worker/2.0 (its contribution came late,
  // and the next round did not take it as late work either).
  for (std::uint64_t round : {3u, 4u})
    for (std::uint32_t fragment : {0u, 1u})
      send_as(coordinator_id(fragment), [&](auto e) {
        auto r = e.initRoundReport();
        r.setFragment(fragment);
        r.setRound(round);
        r.initParticipants(1).set(0, "worker/1.0");
      });
  const auto [ok, body] = ask("data");
  ASSERT_TRUE(ok);
  const auto view = nlohmann::json::parse(body);
  EXPECT_EQ(view["consumed"], 0) << view.dump();
  EXPECT_EQ(view["partial"], 0);
  EXPECT_EQ(view["in_flight"], 0);
  EXPECT_EQ(view["returned"], 10) << "no fragment learned it: it goes back whole";
  send_as("worker/1.0", [](auto e) {
    auto r = e.initDataLeaseRequest();
    r.setUnits(40);
    r.setChunk(10);
  });
  const auto leases = take(E::DATA_LEASE, "worker/1.0");
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0]->envelope().getDataLease().getIndex(), 0u) << "the returned chunk, leased again";
}

// Built-in workers put their data pieces in the Contribution, and the coordinator reports
// them with the round that took it: the registry ties and commits them at once and
// acknowledges the report (the coordinator sends it until it is). A report sent again,
// across a head restart too, is acknowledged and changes nothing; the ties of a worker
// whose node died before its report came find its chunk still waiting for them.
TEST_F(RegistryProtocol, ARoundReportTiesAndCommitsItsDataOnceAndIsAcknowledged) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  for (const auto* worker : {"worker/1.0", "worker/2.0"}) {
    send_as(worker, [](auto e) {
      auto r = e.initDataLeaseRequest();
      r.setUnits(40);
      r.setChunk(10);
    });
    ASSERT_EQ(take(E::DATA_LEASE, worker).size(), 1u) << worker;  // worker/1.0 chunk 0, worker/2.0 chunk 1
  }
  const auto report = [&](std::uint32_t fragment, std::uint64_t round, const char* worker, std::uint64_t chunk) {
    seen_.clear();
    send_as(coordinator_id(fragment), [&](auto e) {
      auto r = e.initRoundReport();
      r.setFragment(fragment);
      r.setRound(round);
      r.initParticipants(1).set(0, worker);
      auto tie = r.initTies(1)[0];
      tie.setWorker(worker);
      tie.setRound(round);
      put_data_pieces(tie.initPieces(1), {{{0, chunk}, {chunk * 10, chunk * 10 + 10}}});
    });
    const auto acks = take(E::ROUND_REPORT_ACK, coordinator_id(fragment).c_str());
    return acks.size() == 1 && acks[0]->envelope().getRoundReportAck().getRound() == round &&
           acks[0]->envelope().getRoundReportAck().getFragment() == fragment;
  };
  const auto data = [&] {
    const auto [ok, body] = ask("data");
    EXPECT_TRUE(ok);
    return nlohmann::json::parse(body);
  };

  EXPECT_TRUE(report(0, 1, "worker/1.0", 0));
  EXPECT_TRUE(report(1, 1, "worker/1.0", 0));
  EXPECT_EQ(data()["consumed"], 10) << data().dump();
  EXPECT_TRUE(report(0, 1, "worker/1.0", 0)) << "its ack was lost: sent again, acknowledged again";
  restart_registry();
  run_for(500ms, {1, 2});
  EXPECT_TRUE(report(1, 1, "worker/1.0", 0)) << "across a head restart";
  auto view = data();
  EXPECT_EQ(view["consumed"], 10) << view.dump();
  EXPECT_TRUE(take(E::REFUSAL, "worker/1.0").empty());

  // worker/2.0's contribution commits in round 2 of fragment 0; its node dies before the
  // report of fragment 1's round 2 comes. Its chunk waits, leased to the dead worker, for
  // that report (no round of fragment 1 opened after the death has committed).
  EXPECT_TRUE(report(0, 2, "worker/2.0", 1));
  run_for(2s, {1});
  ASSERT_EQ(stored().members[1].state, "dead");
  EXPECT_EQ(data()["partial"], 0) << data().dump();
  EXPECT_EQ(data()["returned"], 0);
  EXPECT_TRUE(report(1, 2, "worker/2.0", 1));
  view = data();
  EXPECT_EQ(view["consumed"], 20) << view.dump();
  EXPECT_EQ(view["partial"], 0);
  EXPECT_EQ(view["returned"], 0);
}

// A lease the store refused to keep is not handed out: the worker is told to ask again,
// and the next lease, saved, is another chunk (the unsaved one returns once the worker is gone).
TEST_F(RegistryProtocol, ALeaseTheStoreDidNotKeepIsNotHandedOut) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  const auto ask_lease = [&] {
    seen_.clear();
    send_as("worker/1.0", [](auto e) {
      auto r = e.initDataLeaseRequest();
      r.setUnits(100);
      r.setChunk(10);
    });
  };
  registry_db_.refuse = true;
  ask_lease();
  registry_db_.refuse = false;
  EXPECT_TRUE(take(E::DATA_LEASE, "worker/1.0").empty());
  const auto refusals = take(E::REFUSAL, "worker/1.0");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::storage_failure);
  ask_lease();
  const auto leases = take(E::DATA_LEASE, "worker/1.0");
  ASSERT_EQ(leases.size(), 1u);
  EXPECT_EQ(leases[0]->envelope().getDataLease().getIndex(), 1u);
}

// A data cursor the store cannot give back whole (a damaged record) leases nothing: a
// fresh cursor would hand out units the committed model already learned.
TEST_F(RegistryProtocol, ADamagedDataCursorInTheStoreLeasesNothingAndSaysWhy) {
  using E = schema::Envelope;
  hello("node/pending-a");
  hello("node/pending-b");
  auto snap = stored();
  snap.data_cursor = "ATDC, but not a cursor";
  ASSERT_FALSE(store_.save(snap));
  restart_registry();
  run_for(500ms, {1, 2});
  seen_.clear();
  send_as("worker/1.0", [](auto e) {
    auto r = e.initDataLeaseRequest();
    r.setUnits(100);
    r.setChunk(10);
  });
  EXPECT_TRUE(take(E::DATA_LEASE, "worker/1.0").empty());
  const auto refusals = take(E::REFUSAL, "worker/1.0");
  ASSERT_EQ(refusals.size(), 1u);
  const auto code = static_cast<errc>(refusals[0]->envelope().getRefusal().getCode());
  EXPECT_TRUE(code == errc::checksum_mismatch || code == errc::storage_failure) << "the record's own error";
  const auto [ok, body] = ask("data");
  ASSERT_TRUE(ok);
  const auto view = nlohmann::json::parse(body);
  EXPECT_FALSE(view["leasing"].get<bool>());
  EXPECT_TRUE(view.contains("error")) << view.dump();
  EXPECT_EQ(stored().data_cursor, "ATDC, but not a cursor") << "the damaged record is kept for inspection";
}

class ExternalRegistryProtocol : public RegistryProtocol {
  void adjust(run_config& run) override { run.example = "external"; }
};

TEST_F(ExternalRegistryProtocol, TheFirstNodesModelBecomesTheRunsAndAnotherIsRefusedNamingTheDifference) {
  using E = schema::Envelope;
  const std::string model = "fc1.weight float32 4x2 0\nfc2.weight float32 2x4 1\n";
  hello("node/pending-a", false, model);
  EXPECT_EQ(take(E::WELCOME, "node/pending-a").size(), 1u);
  auto snap = store_.load();
  ASSERT_TRUE(snap && *snap);
  EXPECT_EQ((*snap)->model_signature, model) << "the run's model survives a head restart";

  hello("node/pending-b", false, "fc1.weight float32 4x2 0\nfc2.weight float32 3x4 1\n");
  auto refusals = take(E::REFUSAL, "node/pending-b");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::model_mismatch);
  EXPECT_NE(std::string(refusals[0]->envelope().getRefusal().getMessage().cStr()).find("parameter 2 is 'fc2.weight'"),
            std::string::npos);
  hello("node/pending-c");  // a node with no model of its own (`atoll join`)
  refusals = take(E::REFUSAL, "node/pending-c");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::model_mismatch);
  hello("node/pending-d", false, model);
  EXPECT_EQ(take(E::WELCOME, "node/pending-d").size(), 1u);
  EXPECT_TRUE(take(E::WELCOME, "node/pending-b").empty());
}

TEST_F(RegistryProtocol, EveryNodeHearsWhereTheOthersListenAndANodeKeepsItsKey) {
  using E = schema::Envelope;
  keyed_hello("node/pending-a", 0, "key-a", "tcp://10.0.0.1:7071");
  keyed_hello("node/pending-b", 0, "key-b", "");  // --no-listen
  run_for(600ms, {1, 2});
  ASSERT_FALSE(take(E::PEER_TABLE, "node/1").empty());
  const auto table = table_held_by("node/1");
  ASSERT_EQ(table.nodes.size(), 2u);
  EXPECT_EQ(table.nodes.at(1).endpoint, "tcp://10.0.0.1:7071");
  EXPECT_EQ(table.nodes.at(1).public_key, "key-a");
  EXPECT_EQ(table.nodes.at(2).endpoint, "") << "a relayed node";
  EXPECT_EQ(table.nodes.at(2).public_key, "key-b");
  EXPECT_EQ(table.placed.at("coord/0"), 1u);
  EXPECT_EQ(table.placed.at("coord/1"), 2u);
  EXPECT_FALSE(take(E::PEER_TABLE, "node/2").empty());

  // Heartbeats name the table held: a node that holds the published one hears nothing, a
  // node behind it the version check, with which it asks for the whole table.
  seen_.clear();
  heartbeat(1, table.epoch, routes_digest(table));
  sched_.run();
  EXPECT_TRUE(take(E::PEER_TABLE, "node/1").empty()) << "a current node was sent a table";
  heartbeat(1, table.epoch - 1, 1);
  sched_.run();
  const auto checks = take(E::PEER_TABLE, "node/1");
  ASSERT_EQ(checks.size(), 1u);
  const auto check = read_route_delta(checks[0]->envelope().getPeerTable());
  EXPECT_TRUE(check.delta);
  EXPECT_TRUE(check.table.nodes.empty() && check.removed.empty() && !check.placements_changed);
  EXPECT_EQ(check.base_epoch, table.epoch);
  EXPECT_EQ(check.digest, routes_digest(table));

  // A node whose deltas left a gap asks for the whole table and gets the one node/1 holds;
  // a request for another node's table is refused.
  seen_.clear();
  send_as("node/2", [](auto e) { e.initPeerTableRequest().setNodeId(2); });
  std::vector<route_delta> whole;
  for (const auto& m : take(E::PEER_TABLE, "node/2"))
    if (auto d = read_route_delta(m->envelope().getPeerTable()); !d.delta) whole.push_back(d);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(routes_digest(whole[0].table), routes_digest(table));
  seen_.clear();
  send_as("node/1", [](auto e) { e.initPeerTableRequest().setNodeId(9); });  // not its own id
  ASSERT_EQ(take(E::REFUSAL, "node/1").size(), 1u);
  EXPECT_TRUE(take(E::PEER_TABLE, "node/1").empty());

  // Node 1's id with node 2's key: refused, and node 1's record is unchanged.
  seen_.clear();
  keyed_hello("node/1", 1, "key-b", "tcp://10.0.0.9:1");
  const auto refusals = take(E::REFUSAL, "node/1");
  ASSERT_EQ(refusals.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::sender_conflict);
  EXPECT_TRUE(take(E::WELCOME, "node/1").empty());
  EXPECT_EQ(stored().members[0].public_key, "key-a");
  EXPECT_EQ(stored().members[0].data_endpoint, "tcp://10.0.0.1:7071");

  // With its own key it is welcomed back, listening somewhere new.
  keyed_hello("node/1", 1, "key-a", "tcp://10.0.0.1:7072");
  EXPECT_EQ(take(E::WELCOME, "node/1").size(), 1u);
  EXPECT_EQ(stored().members[0].data_endpoint, "tcp://10.0.0.1:7072");
}

TEST_F(RegistryProtocol, ControlRequestsAnswerFromItsViewsAndRefuseUnknownCommands) {
  hello("node/pending-a");
  const auto members = ask("members", "");
  EXPECT_TRUE(members.first);
  EXPECT_NE(members.second.find("\"state\":\"joining\""), std::string::npos) << members.second;
  // A listing by state and page (actors/decisions/member_query.hpp); a bad query is refused.
  hello("node/pending-b");
  const auto joining = ask("members", "state=joining,offset=1,limit=5");
  ASSERT_TRUE(joining.first) << joining.second;
  const auto page = nlohmann::json::parse(joining.second);
  ASSERT_EQ(page.size(), 1u) << "two joining, the first skipped: " << joining.second;
  EXPECT_EQ(page[0]["node_id"], 2);
  EXPECT_EQ(ask("members", "state=dead").second, "[]");
  const auto bad = ask("members", "limit=many");
  EXPECT_FALSE(bad.first);
  EXPECT_NE(bad.second.find("invalid_config"), std::string::npos) << bad.second;
  const auto unknown = ask("explode", "");
  EXPECT_FALSE(unknown.first);
  EXPECT_NE(unknown.second.find("unknown command 'explode'"), std::string::npos) << unknown.second;
  const auto bad_leave = ask("leave", "x1");
  EXPECT_FALSE(bad_leave.first);
  EXPECT_NE(bad_leave.second.find("invalid_config"), std::string::npos) << bad_leave.second;
  const auto leave = ask("leave", "1");
  EXPECT_TRUE(leave.first) << leave.second;
  EXPECT_EQ(stored().members[0].state, "draining");
  const auto again = ask("leave", "1");
  EXPECT_FALSE(again.first);
  EXPECT_NE(again.second.find("is draining"), std::string::npos) << again.second;
}

// No message may kill an actor (actors/shared/guarded_handler.hpp): before, a handler that
// threw ended the registry, and the head with it. The request it threw on is refused as
// unreadable and counted; the registry answers the next.
TEST_F(RegistryProtocol, AHandlerThatThrowsRefusesItsMessageAndTheRegistryGoesOn) {
  ATL_SKIP_WITHOUT_THROW_POINTS();
  hello("node/pending-a");
  {
    const testing::armed_throw_point armed("registry.handler");
    send_control("members");
    EXPECT_TRUE(take(schema::Envelope::CONTROL_REPLY, "ctl/t").empty());
    const auto refusals = take(schema::Envelope::REFUSAL, "ctl/t");
    ASSERT_EQ(refusals.size(), 1u);
    EXPECT_EQ(static_cast<errc>(refusals[0]->envelope().getRefusal().getCode()), errc::malformed_frame);
    EXPECT_EQ(net_.counters().refused[static_cast<std::size_t>(errc::malformed_frame)].load(), 1u);
  }
  const auto members = ask("members", "");
  EXPECT_TRUE(members.first) << "the registry did not answer after the throw";
  EXPECT_NE(members.second.find("\"state\":\"joining\""), std::string::npos) << members.second;
  const auto status = nlohmann::json::parse(ask("status", "").second);
  EXPECT_EQ(status["refused"]["head"]["malformed_frame"], 1) << status["refused"].dump();
}

// A WorkerDone can overtake the RoundReport of the round its worker merged last (they come
// on different links). The run is finished once the merged rounds are reported, or a grace
// later when a report never comes (its coordinator died between release and report).
TEST_F(RegistryProtocol, TheRunFinishesOnceTheRoundsItsWorkersMergedAreReported) {
  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().run_state, "training");
  for (const auto* worker : {"worker/1.0", "worker/2.0"}) {
    for (std::uint32_t fragment : {0u, 1u})
      send_as(worker, [&](auto e) {
        auto ack = e.initRoundAck();
        ack.setFragment(fragment);
        ack.setRound(1);
        ack.setDigest(7);
      });
    send_as(worker, [](auto e) { e.initWorkerDone().setSteps(10); });
  }
  EXPECT_EQ(stored().run_state, "training") << "rounds merged but not reported";
  send_as("coord/0", [](auto e) {
    auto r = e.initRoundReport();
    r.setFragment(0);
    r.setRound(1);
  });
  EXPECT_EQ(stored().run_state, "training") << "fragment 1's round is not reported yet";
  run_for(3s, {1, 2});
  EXPECT_EQ(stored().run_state, "training") << "within the grace";
  run_for(3s, {1, 2});
  EXPECT_EQ(stored().run_state, "finished") << "past the grace";
}

// A node whose workers finished may stay, to host a keeper replica, until the run finishes.
// Then the registry tells every node still there to stop, and tells one again at each
// heartbeat: a lost Shutdown must not keep a node up forever.
TEST_F(RegistryProtocol, WhenTheRunFinishesEveryNodeStillThereIsToldToStop) {
  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().run_state, "training");
  progress_of("coord/0", 0, 1);  // both coordinators say where they are: round 1 open
  progress_of("coord/1", 1, 1);
  seen_.clear();
  send_as("worker/1.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  run_for(1s, {1, 2});
  ASSERT_EQ(stored().run_state, "training") << "worker/2.0 still trains";
  EXPECT_TRUE(take(schema::Envelope::SHUTDOWN, "node/1").empty()) << "node/1 was stopped while the run trained";

  send_as("worker/2.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  ASSERT_EQ(stored().run_state, "finished");
  for (const auto* node : {"node/1", "node/2"}) {
    const auto shutdowns = take(schema::Envelope::SHUTDOWN, node);
    ASSERT_EQ(shutdowns.size(), 1u) << node;
    EXPECT_STREQ(shutdowns[0]->envelope().getShutdown().getReason().cStr(), "run finished");
  }

  seen_.clear();
  heartbeat(1);
  sched_.run();
  EXPECT_EQ(take(schema::Envelope::SHUTDOWN, "node/1").size(), 1u) << "a heartbeat after the finish";
  EXPECT_TRUE(take(schema::Envelope::SHUTDOWN, "node/2").empty()) << "node/2 did not heartbeat";
}

// The run finishes only once every round that may be committed is reported (its data is
// learned from the report): one a coordinator's progress says is committed, and any while a
// coordinator has not said where it is (a restarted head lost the report in its mailbox);
// each within unreported_round_grace. The seeded fault tier found a head killed with a
// report in its mailbox whose round no worker merged: the run finished without it.
TEST_F(RegistryProtocol, TheRunFinishesOnlyOnceEveryCommittedRoundIsReported) {
  hello("node/pending-a");
  hello("node/pending-b");
  ASSERT_EQ(stored().run_state, "training");
  const auto report = [&](std::uint32_t unit, std::uint64_t round) {
    send_as(coordinator_id(unit), [&](schema::Envelope::Builder e) {
      auto r = e.initRoundReport();
      r.setFragment(unit);
      r.setRound(round);
      r.setDigest(0x77);
    });
  };
  progress_of("coord/0", 0, 1);  // coord/1 has said nothing yet
  send_as("worker/1.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  send_as("worker/2.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  run_for(1s, {1, 2});
  EXPECT_EQ(stored().run_state, "training") << "coord/1 has not said where it is";
  progress_of("coord/1", 1, 3);  // round 3 open: rounds 1 and 2 committed, none reported
  run_for(1s, {1, 2});
  EXPECT_EQ(stored().run_state, "training") << "rounds 1 and 2 of unit 1 are not reported";
  report(1, 1);
  EXPECT_EQ(stored().run_state, "training") << "round 2 of unit 1 is not reported";
  report(1, 2);
  EXPECT_EQ(stored().run_state, "finished");
}

// The same, for a report that never comes: the run finishes after the grace.
TEST_F(RegistryProtocol, ARoundReportThatNeverComesHoldsTheFinishOnlyForTheGrace) {
  hello("node/pending-a");
  hello("node/pending-b");
  progress_of("coord/0", 0, 1);
  progress_of("coord/1", 1, 2);  // round 1 committed, never reported
  send_as("worker/1.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  send_as("worker/2.0", [](auto e) { e.initWorkerDone().setSteps(10); });
  run_for(unreported_round_grace - 1s, {1, 2});
  EXPECT_EQ(stored().run_state, "training");
  run_for(2s, {1, 2});
  EXPECT_EQ(stored().run_state, "finished");
}

// A worker that got a round by state transfer (a joiner, a resync) says so: the views show
// the round it holds, but only a merged result makes its node active (it takes part).
TEST_F(RegistryProtocol, AnAdoptedStateShowsInTheViewsButOnlyAMergedResultMakesANodeActive) {
  hello("node/pending-a");
  hello("node/pending-b");
  run_for(600ms, {1, 2});
  auto state_of_node_1 = [&] {
    const auto members = nlohmann::json::parse(ask("members").second);
    for (const auto& m : members)
      if (m["node_id"] == 1) return m["state"].get<std::string>();
    return std::string("absent");
  };
  ASSERT_EQ(state_of_node_1(), "syncing");
  auto ack = [&](std::uint64_t round, bool adopted) {
    send_as("worker/1.0", [&](auto e) {
      auto a = e.initRoundAck();
      a.setFragment(0);
      a.setRound(round);
      a.setDigest(0xabc);
      a.setAdopted(adopted);
    });
  };
  ack(3, true);
  const auto fragments = nlohmann::json::parse(ask("fragments").second);
  ASSERT_TRUE(fragments.is_array() && !fragments.empty()) << fragments.dump();
  bool shown = false;
  for (const auto& w : fragments[0]["workers"])
    shown = shown || (w["id"] == "worker/1.0" && w["round"] == 3 && w["digest"] == "0000000000000abc");
  EXPECT_TRUE(shown) << fragments.dump();
  EXPECT_EQ(state_of_node_1(), "syncing") << "an adopted state is no sign of taking part";
  ack(4, false);
  EXPECT_EQ(state_of_node_1(), "active");
}

// A replica's host that leaves hands the replica over first (storage.keepers = nodes, the
// default: keeper/1 on node/1 and keeper/2 on node/2, the first two that could keep).
// `atoll leave` on keeper/1's node places keeper/3 on node/4, the newest node that can
// keep and hosts no replica, catching up from keeper/1, in every commit; the leaving node
// gets no Shutdown until keeper/3 reports the round released last. Then keeper/3 takes
// keeper/1's place in the routes and the commits, and the node is told to stop. A
// LeaveRequest (SIGTERM) starts the next hand-over the same way, and one whose new replica
// never reports lets its node go after cluster.handover_ms.
TEST_F(RegistryProtocol, ALeavingReplicaHostIsStoppedOnlyOnceItsSuccessorCaughtUp) {
  using E = schema::Envelope;
  for (const auto* pending : {"node/pending-a", "node/pending-b", "node/pending-c", "node/pending-d"})
    hello(pending, true);
  ASSERT_EQ(stored().run_state, "training");
  ASSERT_EQ(stored().keeper_groups[0].replica_keeper, "node/1");
  ASSERT_EQ(stored().keeper_groups[0].second_replica_keeper, "node/2");
  send_as("coord/0", [](auto e) {
    auto r = e.initRoundReport();
    r.setFragment(0);
    r.setRound(5);
    r.setDigest(0x55);
  });
  const auto keepers_in_membership = [&] {
    std::vector<std::string> out;
    const auto m = take(E::MEMBERSHIP, "coord/0");
    if (!m.empty())
      for (auto k : m.back()->envelope().getMembership().getKeepers()) out.push_back(k.cStr());
    return out;
  };
  const auto keeper_ready = [&](const char* keeper, std::uint64_t round) {
    send_as(keeper, [&](auto e) {
      auto r = e.initKeeperReady();
      auto rounds = r.initRounds(2);
      auto held = r.initHeld(2);
      rounds.set(0, round);
      held.set(0, true);
      held.set(1, false);  // fragment 1 has released nothing yet
    });
  };
  const std::vector<std::uint32_t> all = {1, 2, 3, 4};

  // A replica's placement is sent again each tick until the replica says it runs there.
  run_for(1s, all);
  EXPECT_FALSE(take(E::PLACE_KEEPER, "node/1").empty()) << "keeper/1 has not said it runs";
  keeper_ready("keeper/1", 5);
  seen_.clear();
  run_for(2s, all);
  EXPECT_TRUE(take(E::PLACE_KEEPER, "node/1").empty()) << "keeper/1 said it runs there";
  EXPECT_FALSE(take(E::PLACE_KEEPER, "node/2").empty()) << "keeper/2 has not";

  seen_.clear();
  const auto [ok, reply] = ask("leave", "1");
  ASSERT_TRUE(ok) << reply;
  EXPECT_TRUE(nlohmann::json::parse(reply)["handing_over"].get<bool>()) << reply;
  const auto placed = take(E::PLACE_KEEPER, "node/4");
  ASSERT_FALSE(placed.empty());
  EXPECT_STREQ(placed[0]->envelope().getPlaceKeeper().getKeeper().cStr(), "keeper/3");
  EXPECT_STREQ(placed[0]->envelope().getPlaceKeeper().getSource().cStr(), "keeper/1");
  EXPECT_EQ(stored().keeper_groups[0].incoming_keeper, "node/4");
  EXPECT_EQ(stored().keeper_groups[0].incoming_for, 1u);
  run_for(1s, all);
  EXPECT_EQ(keepers_in_membership(), (std::vector<std::string>{"keeper/1", "keeper/2", "keeper/3"}));
  EXPECT_TRUE(take(E::SHUTDOWN, "node/1").empty()) << "stopped before keeper/3 caught up";

  keeper_ready("keeper/3", 4);  // behind the released round 5
  keeper_ready("keeper/1", 5);  // not the incoming replica
  send_as("keeper/3", [](auto e) {  // one round for two fragments: refused, nothing changes
    auto r = e.initKeeperReady();
    r.initRounds(1).set(0, 5);
    r.initHeld(1).set(0, true);
  });
  const auto refused = take(E::REFUSAL, "keeper/3");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(static_cast<errc>(refused[0]->envelope().getRefusal().getCode()), errc::malformed_frame);
  EXPECT_TRUE(take(E::SHUTDOWN, "node/1").empty()) << "stopped on a report that is behind or not keeper/3's";
  seen_.clear();
  run_for(500ms, all);
  EXPECT_FALSE(take(E::PLACE_KEEPER, "node/4").empty()) << "the hand-over waits on keeper/3: asked again";
  keeper_ready("keeper/3", 5);
  ASSERT_EQ(take(E::SHUTDOWN, "node/1").size(), 1u);
  EXPECT_EQ(stored().keeper_groups[0].replica_keeper, "node/4");
  EXPECT_EQ(stored().keeper_groups[0].replica_keeper_number, 3u);
  EXPECT_EQ(stored().keeper_groups[0].incoming_for, 0u);
  EXPECT_EQ(keepers_in_membership(), (std::vector<std::string>{"keeper/3", "keeper/2"}));
  // The last table that changed the placements names the promoted replica's host.
  std::optional<route_delta> placing;
  for (const auto& m : take(E::PEER_TABLE, "node/2")) {
    auto d = read_route_delta(m->envelope().getPeerTable());
    if (d.placements_changed) placing = d;
  }
  ASSERT_TRUE(placing);
  std::vector<std::string> routed;
  for (const auto& [id, host] : placing->table.placed)
    if (is_kind(id, actor_kind::keeper)) routed.push_back(id + "@" + node_actor_id(host));
  EXPECT_EQ(routed, (std::vector<std::string>{"keeper/2@node/2", "keeper/3@node/4"}));

  // node/4 asks to leave itself (SIGTERM): keeper/4 goes to node/3, the last node that can
  // keep and hosts no replica, and never reports; after cluster.handover_ms node/4 is let
  // go all the same.
  seen_.clear();
  send_as("node/4", [](auto e) {
    auto l = e.initLeaveRequest();
    l.setNodeId(4);
    l.setReason("SIGTERM");
  });
  ASSERT_FALSE(take(E::PLACE_KEEPER, "node/3").empty());
  EXPECT_EQ(stored().keeper_groups[0].incoming_keeper_number, 4u);
  run_for(2s, all);
  EXPECT_TRUE(take(E::SHUTDOWN, "node/4").empty()) << "stopped before cluster.handover_ms";
  run_for(2s, all);
  EXPECT_EQ(take(E::SHUTDOWN, "node/4").size(), 1u) << "held past cluster.handover_ms";
}

// Keeper groups: a fragment in four slices (units 0 to 3) is kept by two groups of two
// replicas, group 0 the units 0 and 2 and group 1 the units 1 and 3, on four distinct nodes.
// Each coordinator hears every group's keepers and takes its own; each replica is placed with
// its group's units. A host of group 1 that dies has only group 1's replica placed anew (on a
// node group 0 uses, the only ones left, never on its group's other host), catching up from
// its group's other replica; group 0 is not touched. A restarted head finds the same groups.
class KeeperGroupsProtocol : public RegistryProtocol {
 protected:
  void adjust(run_config& run) override {
    run.fragments = 1;
    run.shards = 4;
    run.min_workers = 4;  // the run starts with the four nodes (groups are placed then)
  }
};

TEST_F(KeeperGroupsProtocol, EachGroupKeepsItsUnitsAndALostHostMovesOnlyItsGroupsReplica) {
  using E = schema::Envelope;
  for (const auto* pending : {"node/pending-a", "node/pending-b", "node/pending-c", "node/pending-d"})
    hello(pending, true);
  ASSERT_EQ(stored().run_state, "training");
  const auto groups = stored().keeper_groups;
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].replica_keeper_number, 1u);
  EXPECT_EQ(groups[0].second_replica_keeper_number, 2u);
  EXPECT_EQ(groups[1].replica_keeper_number, 3u);
  EXPECT_EQ(groups[1].second_replica_keeper_number, 4u);
  const std::set<std::string> hosts = {groups[0].replica_keeper, groups[0].second_replica_keeper,
                                       groups[1].replica_keeper, groups[1].second_replica_keeper};
  EXPECT_EQ(hosts.size(), 4u) << "the groups spread over the four nodes";
  EXPECT_EQ(hosts.count(""), 0u);

  const auto units_placed = [&](const std::string& host, const char* keeper) {
    std::vector<std::uint32_t> units;
    std::string source;
    for (const auto& m : take(E::PLACE_KEEPER, host)) {
      const auto place = m->envelope().getPlaceKeeper();
      if (std::string(place.getKeeper().cStr()) != keeper) continue;
      units.clear();
      for (const auto u : place.getUnits()) units.push_back(u);
      source = place.getSource().cStr();
    }
    return std::make_pair(units, source);
  };
  EXPECT_EQ(units_placed(groups[0].replica_keeper, "keeper/1").first, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(units_placed(groups[1].second_replica_keeper, "keeper/4").first, (std::vector<std::uint32_t>{1, 3}));

  const auto keepers_of = [&](const char* coordinator, std::uint32_t unit) {
    const auto m = take(E::MEMBERSHIP, coordinator);
    if (m.empty()) return std::vector<std::string>{"none"};
    return keepers_of_unit(read_membership(m.back()->envelope().getMembership()).view, unit);
  };
  run_for(500ms, {1, 2, 3, 4});  // the Membership goes out within route_publish_gap
  EXPECT_EQ(keepers_of("coord/2", 2), (std::vector<std::string>{"keeper/1", "keeper/2"}));
  EXPECT_EQ(keepers_of("coord/3", 3), (std::vector<std::string>{"keeper/3", "keeper/4"}));

  // keeper/3's host dies: the other three heartbeat on.
  const auto lost = node_of(groups[1].replica_keeper);
  ASSERT_TRUE(lost);
  std::vector<std::uint32_t> alive;
  for (std::uint32_t n = 1; n <= 4; ++n)
    if (n != *lost) alive.push_back(n);
  seen_.clear();
  run_for(3s, alive);
  const auto after = stored().keeper_groups;
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0], groups[0]) << "group 0 is not touched";
  EXPECT_EQ(after[1].second_replica_keeper, groups[1].second_replica_keeper);
  EXPECT_NE(after[1].replica_keeper, groups[1].replica_keeper);
  EXPECT_NE(after[1].replica_keeper, "") << "a node group 0 uses keeps it rather than nobody";
  EXPECT_NE(after[1].replica_keeper, after[1].second_replica_keeper) << "two copies on one machine are one";
  const auto [units, source] = units_placed(after[1].replica_keeper, "keeper/3");
  EXPECT_EQ(units, (std::vector<std::uint32_t>{1, 3}));
  EXPECT_EQ(source, "keeper/4") << "it catches up from its group's other replica";
  EXPECT_EQ(keepers_of("coord/1", 1), (std::vector<std::string>{"keeper/3", "keeper/4"}));

  restart_registry();
  EXPECT_EQ(stored().keeper_groups, after) << "a restarted head keeps the run's groups";
}

// Keeper groups placed while two nodes could keep share them; each node that joins since
// and keeps nothing takes one crowded replica by a hand-over (spreading): the new replica
// catches up from the old one, takes its place once it reports its group's units, and the
// old one is dropped from its host (DropKeeper), which stays; a head restarted mid-way
// resumes the spreading from its store. With four nodes the four replicas end on four nodes.
class KeeperGroupsJoiningProtocol : public RegistryProtocol {
 protected:
  void adjust(run_config& run) override {
    run.fragments = 1;
    run.shards = 4;
  }
};

TEST_F(KeeperGroupsJoiningProtocol, NodesThatJoinLaterTakeTheReplicasOfCrowdedGroups) {
  using E = schema::Envelope;
  hello("node/pending-a", true);
  hello("node/pending-b", true);
  ASSERT_EQ(stored().run_state, "training");
  const auto hosts = [&] {
    std::set<std::string> out;
    for (const auto& g : stored().keeper_groups)
      for (const auto* h : {&g.replica_keeper, &g.second_replica_keeper})
        if (!h->empty()) out.insert(*h);
    return out;
  };
  ASSERT_EQ(hosts(), (std::set<std::string>{"node/1", "node/2"})) << "two nodes keep both groups";
  hello("node/pending-c", true);
  hello("node/pending-d", true);
  std::vector<std::uint32_t> all = {1, 2, 3, 4};
  std::set<std::string> dropped;  // "keeper/N@node/M"
  bool restarted = false;
  for (int step = 0; step < 10; ++step) {
    run_for(500ms, all);
    const auto groups = stored().keeper_groups;
    if (!restarted && std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.incoming_spreading; })) {
      restart_registry();  // a head restarted mid-spreading resumes it from its store
      restarted = true;
      run_for(500ms, all);
    }
    for (const auto& g : stored().keeper_groups) {
      if (g.incoming_for == 0) continue;
      send_as(keeper_id(g.incoming_keeper_number).c_str(), [](auto e) {
        auto r = e.initKeeperReady();  // nothing committed yet: ready at once
        r.initRounds(4);
        r.initHeld(4);
      });
    }
    for (const auto* host : {"node/1", "node/2", "node/3", "node/4"})
      for (const auto& m : take(E::DROP_KEEPER, host))
        dropped.insert(std::string(m->envelope().getDropKeeper().getKeeper().cStr()) + "@" + host);
  }
  EXPECT_TRUE(restarted) << "no spreading hand-over was ever stored";
  EXPECT_EQ(hosts().size(), 4u) << "the replicas spread over the four nodes";
  for (const auto& g : stored().keeper_groups) EXPECT_EQ(g.incoming_for, 0u) << "a hand-over still pending";
  // Two, the fewest that spread four replicas from two nodes to four: the replicas placed
  // on their units' coordinator hosts stay (three moved before they preferred those hosts).
  EXPECT_EQ(dropped.size(), 2u) << "two replicas moved; each old one dropped where it ran";
  for (const auto& d : dropped) {
    const auto number = static_cast<std::uint32_t>(std::stoul(d.substr(d.find('/') + 1)));
    for (const auto& g : stored().keeper_groups)
      EXPECT_TRUE(g.replica_keeper_number != number && g.second_replica_keeper_number != number)
          << d << " is dropped but still placed";
  }
  EXPECT_EQ(stored().keeper_groups.size(), 2u);
  for (const auto* node : {"node/1", "node/2", "node/3", "node/4"})
    EXPECT_TRUE(take(E::SHUTDOWN, node).empty()) << node << " was told to stop";
}

}  // namespace
}  // namespace atl
