// Protocol tier under seeded faults (RELIABILITY.md, test tiers): two fragment
// coordinators, two keepers (the head's and a replica that every commit also needs) and
// three Streaming DiLoCo workers (fake replicas, int8 with error feedback, overlap 1) in
// one process, on CAF's deterministic scheduler with simulated time. Every message goes
// through encode and ingress; fragment state reaches resyncing workers in chunks of 16
// values from the keepers. A schedule drawn from the seed drops, duplicates and delays
// (so reorders) messages, and may kill a coordinator or the replica keeper mid-run, which
// is re-placed at once: a fresh coordinator reloads from the head's keeper, a fresh replica
// catches up from it, as after a node's lease ran out. A killed worker is replaced by a
// new node's worker, which joins mid-run.
// Half the seeds also give rounds a deadline (diloco.round_deadline_ms), so rounds close
// without the workers whose messages were lost or late (whose late work is folded into the
// next round: diloco.late_work = keep), and half of those close adaptively
// (diloco.round_close = adaptive: once a majority is in and its grace passed); half send early results
// (diloco.early_results: provisional results during the commit, then confirmations), so
// those are dropped, duplicated and reordered too.
//
// Each seed must:
//   L1  finish every worker within 10 simulated minutes (the fault-free run takes ~0 s);
//   S1  see every digest a worker acknowledged for (fragment, round) equal the keeper's;
//   S3  leave the keeper with every round of each fragment once, in order (none lost);
//   S4  find in the replica only rounds the head's keeper holds, with the same bytes;
//   W1  install in a joiner only inner-optimizer state that a donor lent (a warm start
//       across dropped, duplicated and reordered chunks installs its donor's bytes or
//       none).
// And every tenth seed, run twice, must deliver the same messages in the same order (the
// "unseed" check): a failing seed replays exactly.
//
//   ATOLL_FAULT_SEEDS=N   seeds 1..N (default 2000, a few seconds)
//   ATOLL_FAULT_SEED=S    replay seed S alone; a failure names its seed
#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <set>

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/decisions/quorum.hpp"
#include "actors/keeper/keeper.hpp"
#include "actors/shared/messages.hpp"
#include "actors/worker/worker.hpp"
#include "runtime/core/digest.hpp"
#include "storage/checkpoint_store.hpp"
#include "tests/deterministic.hpp"
#include "tests/fake_replica.hpp"

namespace atl {
namespace {

constexpr int workers = 3;
constexpr int fragments = 2;
constexpr int min_workers = 2;  // run.min_workers: a deadline may close a round with two
constexpr auto time_limit = std::chrono::minutes(10);  // simulated

struct fault_plan {
  double drop = 0, duplicate = 0, delay = 0;  // per message
  std::uint64_t kill_after = 0;  // messages sent before a coordinator dies; 0: never
  std::chrono::milliseconds round_deadline{0};  // diloco.round_deadline_ms of the coordinators
  bool early_results = false;  // diloco.early_results of the coordinators
  bool adaptive_close = false;  // diloco.round_close = adaptive (grace from 50 ms)
};

fault_plan plan_for(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> rate(0.0, 0.08);
  fault_plan plan{rate(rng), rate(rng), rate(rng), 0, std::chrono::milliseconds(0)};
  if (rng() % 2) plan.kill_after = 50 + rng() % 400;
  if (rng() % 2) plan.round_deadline = std::chrono::milliseconds(500 + rng() % 3000);
  plan.early_results = rng() % 2;
  // Half the seeds with a deadline also close adaptively, decided from what was drawn (a
  // draw of its own would move every other seed's schedule).
  plan.adaptive_close = plan.round_deadline.count() % 2 == 0 && plan.round_deadline.count() > 0;
  return plan;
}

// The in-memory transport with faults: each message is dropped, duplicated, held back
// (delivered later, in random order) or delivered. Reports to the registry stand-in are
// never touched: they are what the test checks, not part of the protocol under test.
class faulty_transport : public transport {
 public:
  faulty_transport(directory& dir, cluster_identity& cluster, std::mt19937_64& rng, fault_plan plan)
      : dir_(dir), cluster_(cluster), rng_(rng), plan_(plan) {}

  void send(const std::string& receiver, wire::frames frames) override {
    counters_->messages_out++;
    if (receiver == "registry") {
      deliver(std::move(frames));
      return;
    }
    const double x = std::uniform_real_distribution<double>(0.0, 1.0)(rng_);
    if (x < plan_.drop) {
      dropped++;
    } else if (x < plan_.drop + plan_.duplicate) {
      duplicated++;
      deliver(wire::frames(frames));
      deliver(std::move(frames));
    } else if (x < plan_.drop + plan_.duplicate + plan_.delay) {
      delayed++;
      held_.push_back(std::move(frames));
    } else {
      deliver(std::move(frames));
    }
  }

  // Delivers one held message, chosen at random; false if none is held.
  bool release_one() {
    if (held_.empty()) return false;
    const auto i = rng_() % held_.size();
    auto frames = std::move(held_[i]);
    held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
    deliver(std::move(frames));
    return true;
  }

  bool delivers_in_process(const std::string& id) const override { return dir_.contains(id); }
  std::uint64_t sent() const { return counters_->messages_out.load(); }
  std::uint64_t dropped = 0, duplicated = 0, delayed = 0;
  // Every delivery so far, in order, as one digest: the run's trace. A seed run twice must
  // give the same trace (the "unseed" check): otherwise a failing seed would not replay.
  std::uint64_t trace() const { return trace_; }

 private:
  void deliver(wire::frames frames) {
    for (const auto& frame : frames) {
      const std::uint64_t link[2] = {trace_, digest64(frame.data(), frame.size())};
      trace_ = digest64(link, sizeof link);
    }
    (void)deliver_local(std::move(frames), wire::limits{}, cluster_, dir_, *counters_);
  }

  directory& dir_;
  cluster_identity& cluster_;
  std::mt19937_64& rng_;
  fault_plan plan_;
  std::vector<wire::frames> held_;
  std::uint64_t trace_ = 0;
};

// What the registry stand-in saw. Everything runs on the test's thread: no locks.
struct registry_record {
  std::vector<std::string> members;
  std::vector<std::string> keepers = {"keeper/0", "keeper/1"};
  std::uint64_t epoch = 1;  // grows when a coordinator is re-placed, as the registry's does
  std::map<std::pair<std::uint32_t, std::uint64_t>, std::set<std::uint64_t>> acked;  // (fragment, round) -> digests
  std::set<std::string> done;
};

// Does what the registry does for rounds: answers MembershipRequests,
// publishes the membership every second (a lost one is repaired), and in the run's tail
// drops finished workers and shrinks the quorum. Records acks and finished workers.
caf::behavior registry_stub(caf::event_based_actor* self, transport* net, std::string cluster, registry_record* rec) {
  auto mail = std::make_shared<mailer>(*net, "registry", cluster);
  auto send_membership = [=](const std::string& to) {
    wire::outgoing out;
    auto m = out.envelope.initMembership();
    m.setEpoch(rec->epoch);
    auto list = m.initWorkers(static_cast<unsigned>(rec->members.size()));
    for (unsigned i = 0; i < rec->members.size(); ++i) list.set(i, rec->members[i]);
    m.setQuorum(quorum::required_participants(min_workers, rec->members.size(), !rec->done.empty()));
    auto keepers = m.initKeepers(static_cast<unsigned>(rec->keepers.size()));
    for (unsigned i = 0; i < rec->keepers.size(); ++i) keepers.set(i, rec->keepers[i]);
    mail->send(to, rec->epoch, out);
  };
  auto publish = [=] {
    for (int f = 0; f < fragments; ++f) send_membership("coord/" + std::to_string(f));
  };
  self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        const auto env = msg->envelope();
        if (env.isMembershipRequest()) {
          send_membership(msg->sender());
        } else if (env.isRoundAck()) {
          const auto ack = env.getRoundAck();
          rec->acked[{ack.getFragment(), ack.getRound()}].insert(ack.getDigest());
        } else if (env.isWorkerDone()) {
          rec->done.insert(msg->sender());
          rec->members.erase(std::remove(rec->members.begin(), rec->members.end(), msg->sender()), rec->members.end());
          publish();
        }
      },
      [=](tick_atom) {
        publish();
        self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
      },
  };
}

struct seed_outcome {
  std::string failure;  // empty: every invariant held
  std::uint64_t dropped = 0, duplicated = 0, delayed = 0;
  bool killed = false;
  std::uint64_t warm_starts = 0;  // joiners that installed a donor's inner-optimizer state
  double simulated_s = 0;
  std::uint64_t trace = 0;  // every delivery, in order (faulty_transport::trace)
};

// One run under the faults of `seed`, on a fresh deterministic actor system.
seed_outcome run_seed(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto plan = plan_for(rng);
  caf::actor_system_config cfg;
  caf::actor_system sys(testing::deterministic(cfg));
  auto& sched = testing::test_scheduler(sys);
  const std::string cluster_id = "cluster-faults";
  directory dir;
  cluster_identity cluster(cluster_id);
  faulty_transport net(dir, cluster, rng, plan);
  auto kv = make_memory_store();
  checkpoint_store checkpoints(*kv, 1000);
  registry_record rec;

  run_config run;
  run.steps = 60;
  run.sync_every = 5;
  run.fragments = fragments;
  run.overlap = 1;
  run.alpha = 0.5;
  run.codec = "int8";
  run.error_feedback = true;
  run.result_timeout_ms = 3000;
  run.eval_every = 1000;
  run.log_every = 1000;
  run.state_chunk_values = 16;  // fragments of 48 and 49 values travel in four chunks
  std::vector<std::string> worker_ids;
  for (int k = 0; k < workers; ++k) worker_ids.push_back("worker/1." + std::to_string(k));
  rec.members = worker_ids;

  auto spawn_coordinator = [&](std::uint32_t f) {
    coordinator_config cc;
    cc.fragment = f;
    cc.min_workers = min_workers;
    cc.outer = {0.7f, 0.9f};
    cc.round_deadline = plan.round_deadline;
    cc.adaptive_close = plan.adaptive_close;
    cc.keep_late_work = plan.round_deadline.count() > 0;  // rounds that close without someone take its late work
    cc.grace_min = std::chrono::milliseconds(50);
    cc.early_results = plan.early_results;
    cc.state_chunk_values = static_cast<std::size_t>(run.state_chunk_values);
    cc.result_codec = codec_kind::int8;  // low-bit both ways, as coordinator_config_for sets for this run
    cc.result_chunk = static_cast<std::size_t>(run.codec_chunk);
    dir.add("coord/" + std::to_string(f), sys.spawn(coordinator_actor, static_cast<transport*>(&net), cluster_id, cc));
  };
  dir.add("keeper/0",
          sys.spawn(keeper_actor, static_cast<transport*>(&net), std::string("keeper/0"), cluster_id, &checkpoints));
  dir.add("registry", sys.spawn(registry_stub, static_cast<transport*>(&net), cluster_id, &rec));
  std::shared_ptr<keeper_storage> replica;
  auto spawn_replica = [&] {  // on a fresh disk, catching up from the head's keeper
    replica = std::make_shared<keeper_storage>();
    replica->db = make_memory_store();
    replica->checkpoints = std::make_unique<checkpoint_store>(*replica->db, 1000);
    dir.add("keeper/1", sys.spawn(keeper_replica_actor, static_cast<transport*>(&net), std::string("keeper/1"),
                                  cluster_id, replica, std::string("keeper/0"), std::uint32_t{fragments}));
  };
  spawn_replica();
  for (std::uint32_t f = 0; f < fragments; ++f) spawn_coordinator(f);
  auto ledger = std::make_shared<testing::inner_state_ledger>();  // W1
  auto spawn_worker = [&](const std::string& id, std::uint32_t rank) {
    worker_config wc;
    wc.id = id;
    wc.cluster_id = cluster_id;
    wc.spec.rank = rank;
    wc.spec.world_size = workers;
    wc.run = run;
    replica_factory factory = [ledger](const run_config&, const replica_spec& s) {
      return std::make_unique<testing::fake_replica>(s.rank, fragments, ledger);
    };
    dir.add(wc.id, sys.spawn(worker_actor, static_cast<transport*>(&net), wc, factory));
  };
  for (int k = 0; k < workers; ++k)
    spawn_worker(worker_ids[static_cast<std::size_t>(k)], static_cast<std::uint32_t>(k));
  std::set<std::string> live(worker_ids.begin(), worker_ids.end());  // the run ends when all of them finished

  seed_outcome out;
  const auto start = sched.clock().now();
  for (;;) {
    if (std::all_of(live.begin(), live.end(), [&](const std::string& w) { return rec.done.count(w) > 0; })) break;
    if (sched.clock().now() - start > time_limit) {
      out.failure = "L1: " + std::to_string(rec.done.size()) + " workers finished in 10 simulated minutes";
      break;
    }
    if (plan.kill_after > 0 && !out.killed && net.sent() >= plan.kill_after) {
      // A coordinator, the replica keeper or a worker dies with its node. The registry places
      // a new coordinator or replica at once; a dead worker leaves the membership and a new
      // node's worker (a new id, the same data shard) joins in the same epoch change.
      const auto victim = static_cast<std::uint32_t>(rng() % (fragments + 2));
      std::string id = victim < fragments ? "coord/" + std::to_string(victim) : "keeper/1";
      std::string joiner;
      if (victim == fragments + 1) {
        const auto k = rng() % workers;
        id = worker_ids[k];
        joiner = "worker/2." + std::to_string(k);
        if (rec.done.count(id)) id.clear();  // it had finished: nothing to kill
      }
      if (!id.empty()) {
        caf::anon_send_exit(dir.find(id), caf::exit_reason::kill);
        dir.remove(id);
        rec.epoch++;  // its node's death is a membership change
        if (victim < fragments) spawn_coordinator(victim);
        else if (victim == fragments) spawn_replica();
        else {
          live.erase(id);
          live.insert(joiner);
          std::replace(rec.members.begin(), rec.members.end(), id, joiner);
          spawn_worker(joiner, static_cast<std::uint32_t>(joiner.back() - '0'));
        }
      }
      out.killed = true;
    }
    if (sched.has_job()) {
      if (rng() % 20 == 0) net.release_one();
      sched.run_once();
    } else if (!net.release_one() && !sched.trigger_timeout()) {
      out.failure = "L1: nothing left to run and the workers are not done";
      break;
    }
  }
  out.simulated_s = std::chrono::duration<double>(sched.clock().now() - start).count();
  out.dropped = net.dropped;
  out.trace = net.trace();
  out.duplicated = net.duplicated;
  out.delayed = net.delayed;

  // S1 and S3, against what the keeper holds.
  auto kept = checkpoints.list();
  if (!kept) {
    out.failure = "keeper: " + kept.err().describe();
  } else if (out.failure.empty()) {
    std::map<std::pair<std::uint32_t, std::uint64_t>, std::uint64_t> keeper_digest;
    std::map<std::uint32_t, std::uint64_t> next_round;
    for (const auto& c : *kept) {
      if (c.round != next_round[c.fragment]) {
        out.failure = "S3: fragment " + std::to_string(c.fragment) + " has round " + std::to_string(c.round) +
                      " where round " + std::to_string(next_round[c.fragment]) + " was due";
        break;
      }
      next_round[c.fragment]++;
      keeper_digest[{c.fragment, c.round}] = c.digest;
    }
    for (const auto& [key, digests] : rec.acked) {
      if (!out.failure.empty()) break;
      const auto kept_digest = keeper_digest.find(key);
      if (digests.size() != 1 || kept_digest == keeper_digest.end() || *digests.begin() != kept_digest->second)
        out.failure = "S1: fragment " + std::to_string(key.first) + " round " + std::to_string(key.second) +
                      " was acknowledged with " + std::to_string(digests.size()) +
                      " digest(s) that are not the keeper's";
    }
    for (std::uint32_t f = 0; f < fragments && out.failure.empty(); ++f)
      if (next_round[f] < 2) out.failure = "fragment " + std::to_string(f) + " committed no round";
    if (out.failure.empty() && ledger->installed_unlent > 0)
      out.failure = "W1: a joiner installed inner-optimizer state no donor lent";
    out.warm_starts = ledger->installed;
    auto replicated = replica->checkpoints->list();
    if (!replicated) {
      out.failure = "replica: " + replicated.err().describe();
    } else {
      for (const auto& c : *replicated) {
        const auto head = keeper_digest.find({c.fragment, c.round});
        if (out.failure.empty() && (head == keeper_digest.end() || head->second != c.digest))
          out.failure = "S4: the replica's fragment " + std::to_string(c.fragment) + " round " +
                        std::to_string(c.round) + " is not the head keeper's";
      }
    }
  }

  for (const auto& id : dir.ids()) caf::anon_send_exit(dir.find(id), caf::exit_reason::user_shutdown);
  dir.clear();
  sched.run();  // lets every actor see its exit, so the system can shut down
  return out;
}

std::vector<std::uint64_t> seeds_to_run() {
  if (const char* one = std::getenv("ATOLL_FAULT_SEED")) return {std::strtoull(one, nullptr, 10)};
  std::uint64_t count = 2000;
  if (const char* n = std::getenv("ATOLL_FAULT_SEEDS")) count = std::strtoull(n, nullptr, 10);
  std::vector<std::uint64_t> seeds;
  for (std::uint64_t s = 1; s <= count; ++s) seeds.push_back(s);
  return seeds;
}

// FoundationDB's "unseed" check: every tenth seed runs twice and must deliver the same
// messages in the same order. A difference is nondeterminism outside the seed (a clock,
// an unordered container, a thread), and a failing seed then would not replay.
TEST(ProtocolFaults, ASeedRunTwiceDeliversTheSameMessagesInTheSameOrder) {
  std::size_t checked = 0;
  for (const auto seed : seeds_to_run()) {
    if (seed % 10 != 0 && !std::getenv("ATOLL_FAULT_SEED")) continue;
    const auto first = run_seed(seed), second = run_seed(seed);
    EXPECT_NE(first.trace, 0u);
    EXPECT_EQ(first.trace, second.trace) << "seed " << seed << " ran two ways (replay: ATOLL_FAULT_SEED=" << seed
                                         << ")";
    ++checked;
  }
  EXPECT_GT(checked, 0u);
}

TEST(ProtocolFaults, EverySeedFinishesAgreesAndKeepsEveryRound) {
  std::uint64_t dropped = 0, duplicated = 0, delayed = 0, kills = 0, failures = 0, warm_starts = 0;
  double longest = 0;
  const auto seeds = seeds_to_run();
  for (const auto seed : seeds) {
    const auto out = run_seed(seed);
    dropped += out.dropped;
    duplicated += out.duplicated;
    delayed += out.delayed;
    kills += out.killed;
    warm_starts += out.warm_starts;
    longest = std::max(longest, out.simulated_s);
    if (!out.failure.empty()) {
      ++failures;
      ADD_FAILURE() << "seed " << seed << ": " << out.failure << " (replay: ATOLL_FAULT_SEED=" << seed << ")";
    }
  }
  std::cout << seeds.size() << " seeds: " << dropped << " dropped, " << duplicated << " duplicated, " << delayed
            << " delayed, " << kills << " coordinators, replicas or workers killed, " << warm_starts
            << " warm joiners; longest run " << longest << " simulated s; " << failures << " failed\n";
  // The schedule must have injected faults at all, or the test proves nothing.
  if (seeds.size() >= 50) {
    EXPECT_GT(dropped, 0u);
    EXPECT_GT(duplicated, 0u);
    EXPECT_GT(delayed, 0u);
    EXPECT_GT(kills, 0u);
    EXPECT_GT(warm_starts, 0u);  // killed workers' replacements took a donor's state
  }
}

}  // namespace
}  // namespace atl
