// Process tier, membership under faults (RELIABILITY.md fault matrix): a node hosting a
// coordinator is SIGKILLed, nodes leave and get SIGTERM, a node joins mid-run, a node is
// SIGSTOPped past its lease. Each test checks that the run finishes (L1), that the workers
// at the final round hold the keeper's digest (S1) and, where rounds could be lost, that
// the keeper's rounds only go up (S3, S4).
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/decisions/data_cursor.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/core/exit_status.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/kv_store.hpp"
#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::agreeing_at_final_round;
using testing::ask;
using testing::mlp_head;
using testing::rounds_with;
using testing::shut_down;
using testing::subprocess;
using namespace std::chrono_literals;

// Unit `unit`'s rounds in each keeper store that exists under `paths`, read after the
// processes are gone: round -> store -> digest.
std::map<std::uint64_t, std::map<std::string, std::string>> unit_copies(const std::vector<std::string>& paths,
                                                                        std::uint32_t unit) {
  std::map<std::uint64_t, std::map<std::string, std::string>> copies;
  for (const auto& path : paths) {
    auto db = open_rocksdb_store(path);
    if (!db) continue;
    checkpoint_store store(**db, 100);
    auto stored = store.list();
    EXPECT_TRUE(stored) << path;
    if (!stored) continue;
    for (const auto& c : *stored)
      if (c.fragment == unit) copies[c.round][path] = digest_hex(c.digest);
  }
  return copies;
}

std::map<std::uint64_t, std::map<std::string, std::string>> fragment0_copies(const std::vector<std::string>& paths) {
  return unit_copies(paths, 0);
}

// Rounds 1 to `last` of fragment 0 are each on two machines at least, every copy of a
// round holds the same bytes (S4), and round `last` is the final digest (S1).
void expect_every_round_on_two_machines(const std::map<std::uint64_t, std::map<std::string, std::string>>& copies,
                                        std::uint64_t last, const std::string& final_digest) {
  for (std::uint64_t round = 1; round <= last; ++round) {
    const auto& held = copies.count(round) ? copies.at(round) : std::map<std::string, std::string>{};
    EXPECT_GE(held.size(), 2u) << "round " << round << " is on fewer than two machines";
    for (const auto& [path, digest] : held) EXPECT_EQ(digest, held.begin()->second) << path << " round " << round;
  }
  ASSERT_TRUE(copies.count(last));
  EXPECT_EQ(copies.at(last).begin()->second, final_digest);
}

// The head's store and every keeper-N under each node's run dir DIR/nodeK (a hand-over's
// replica has a new number).
std::vector<std::string> keeper_stores(const testing::temp_dir& dir, const std::string& head_dir, std::size_t nodes) {
  std::vector<std::string> paths = {head_dir + "/db"};
  for (std::size_t i = 0; i < nodes; ++i) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir.sub("node" + std::to_string(i)), ec))
      if (entry.path().filename().string().rfind("keeper-", 0) == 0) paths.push_back(entry.path().string());
  }
  return paths;
}

// SIGKILL the process of node `host` and wait for every other node to finish the run.
void kill_host_and_let_the_rest_finish(const std::string& ep, const std::string& host,
                                       std::vector<std::unique_ptr<subprocess>>& nodes, subprocess& head,
                                       std::chrono::seconds finish_within) {
  subprocess* victim = testing::process_of(ep, host, nodes);
  ASSERT_NE(victim, nullptr) << "no process for " << host;
  victim->signal(SIGKILL);
  EXPECT_EQ(victim->wait(5s), 128 + SIGKILL);
  for (auto& n : nodes) {
    if (n.get() == victim) continue;
    std::string outputs;
    for (auto& m : nodes) outputs += m->output();
    ASSERT_EQ(n->wait(finish_within), 0) << outputs << head.output();
  }
}

// SIGKILL the node hosting coord/0 mid-run. Its lease expires, the registry re-places the
// coordinator on a survivor, which reloads the committed state from the keeper; the
// survivors resync and finish, and no committed round is lost or repeated.
TEST(Failover, KillingTheNodeOfACoordinatorReplacesItAndTheRunFinishes) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(testing::fast_lease_head(head_dir), dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);

  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();
  const std::string host = testing::coordinator_host(ep);
  ASSERT_FALSE(host.empty());
  const int killed_at = testing::round_of(ep);
  // The survivors finish on their own.
  ASSERT_NO_FATAL_FAILURE(kill_host_and_let_the_rest_finish(ep, host, nodes, head, 90s));

  const json status = ask(ep, "status");
  ASSERT_TRUE(status.is_object());
  EXPECT_EQ(status["state"], "finished") << status.dump();
  int dead = 0;
  for (const auto& m : status["members"]) dead += m["state"] == "dead";
  EXPECT_EQ(dead, 1) << status["members"].dump();
  EXPECT_NE(head.output().find("re-placed on"), std::string::npos) << head.output();

  const json fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  EXPECT_GT(final_round, killed_at + 5);  // training went on well after the kill
  EXPECT_NE(fragments[0]["coordinator"], host);
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();

  // S3/S4: the keeper's rounds only go up, and every round committed before the kill is there.
  std::int64_t previous = -1;
  bool seen_killed_at = false;
  for (const auto& c : ask(ep, "checkpoints")) {
    EXPECT_GT(c["round"].get<std::int64_t>(), previous);
    previous = c["round"];
    seen_killed_at = seen_killed_at || c["round"] == killed_at;
  }
  EXPECT_TRUE(seen_killed_at);
  EXPECT_EQ(previous, final_round);
  shut_down(ep, head);
}

// Sharded rounds (diloco.shards = 2): SIGKILL the host of slice 1's coordinator while slice
// 0's lives elsewhere. Slice 1 is re-placed on a survivor and resumes from the keepers; slice
// 0's coordinator is not moved by the kill; both units go on to the last round, where the
// survivors hold the keepers' digest of each.
TEST(Failover, KillingTheHostOfOneSliceReplacesThatSliceAloneAndTheRunFinishes) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(
      mlp_head(head_dir, 800,
               {"--set", "model.width=4096", "--set", "diloco.sync_every=25", "--set", "diloco.shards=2", "--set",
                "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000", "--set", "storage.keep_rounds=100"}),
      dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();
  const std::string slice0_host = testing::coordinator_host(ep, "coord/0");
  const std::string slice1_host = testing::coordinator_host(ep, "coord/1");
  ASSERT_FALSE(slice0_host.empty());
  ASSERT_NE(slice0_host, slice1_host) << "the slices' coordinators share a node";
  const int killed_at = testing::round_of(ep);
  ASSERT_NO_FATAL_FAILURE(kill_host_and_let_the_rest_finish(ep, slice1_host, nodes, head, 120s));
  EXPECT_EQ(ask(ep, "status")["state"], "finished");
  // The kill moves slice 1's coordinator alone (a survivor that finishes and leaves moves
  // what it hosts later, as without shards).
  EXPECT_NE(head.output().find(slice1_host + " is gone; coordinator of fragment 1 re-placed on"), std::string::npos)
      << head.output();
  EXPECT_EQ(head.output().find(slice1_host + " is gone; coordinator of fragment 0"), std::string::npos)
      << head.output();

  const json units = ask(ep, "fragments");
  ASSERT_EQ(units.size(), 2u) << units.dump();
  EXPECT_EQ(units[1]["fragment"], 0) << units.dump();  // unit 1 is slice 1 of fragment 0
  EXPECT_EQ(units[1]["slice"], 1) << units.dump();
  EXPECT_NE(units[1]["placed_on"], slice1_host) << units.dump();
  for (const auto& unit : units) {
    EXPECT_EQ(unit["round"], 32) << unit.dump();  // 800 steps, a round every 25
    EXPECT_GT(unit["round"].get<int>(), killed_at);
    int agreeing = 0;
    for (const auto& w : unit["workers"]) {
      if (w["round"] != unit["round"]) continue;
      EXPECT_EQ(w["digest"], unit["keeper_digest"]) << w.dump();
      ++agreeing;
    }
    EXPECT_EQ(agreeing, 2) << unit.dump();
  }
  shut_down(ep, head);
}

// Keeper groups: a fragment in four slices is kept by two groups of two replicas (the
// units 0 and 2, and 1 and 3), spread over the three nodes (a node that joined after the
// groups were placed takes a replica off a shared node). SIGKILL the host of a group 1
// replica: the replica is placed anew on a survivor, never beside its group's other one,
// and the run finishes. Read after the processes are gone, no store holds units of two
// groups, and every round of every unit is on two machines with one digest.
TEST(Failover, KillingAKeeperGroupsHostReplacesItsReplicaAndEveryStoreHoldsOnlyItsGroupsUnits) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(mlp_head(head_dir, 600,
                           {"--set", "model.width=4096", "--set", "diloco.sync_every=25", "--set", "diloco.shards=4",
                            "--set", "storage.keepers=nodes", "--set", "cluster.heartbeat_ms=300", "--set",
                            "cluster.lease_ms=2000", "--set", "storage.keep_rounds=100"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir, true);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();
  // Each group's replicas (an incoming one included) by host.
  const auto hosts_of_group = [&](int group) {
    std::vector<std::string> hosts;
    const json status = ask(ep, "status");
    for (const auto& k : status["keepers"])
      if (k.value("group", -1) == group) {
        EXPECT_EQ(k["units"], group == 0 ? json::array({0, 2}) : json::array({1, 3})) << k.dump();
        hosts.push_back(k["on"]);
      }
    return hosts;
  };
  ASSERT_GE(hosts_of_group(0).size(), 2u);
  const auto group1 = hosts_of_group(1);
  ASSERT_GE(group1.size(), 2u);
  const std::string victim_host = group1[0];
  ASSERT_NO_FATAL_FAILURE(kill_host_and_let_the_rest_finish(ep, victim_host, nodes, head, 120s));
  EXPECT_EQ(ask(ep, "status")["state"], "finished");
  for (int group = 0; group < 2; ++group) {
    const auto hosts = hosts_of_group(group);
    ASSERT_EQ(hosts.size(), 2u) << "group " << group;
    EXPECT_NE(hosts[0], hosts[1]) << "two copies of group " << group << " on one machine are one";
    for (const auto& h : hosts) EXPECT_NE(h, victim_host) << "group " << group;
  }
  const json units = ask(ep, "fragments");
  ASSERT_EQ(units.size(), 4u) << units.dump();
  std::map<std::uint32_t, std::string> final_digest;
  for (const auto& unit : units) {
    EXPECT_EQ(unit["round"], 24) << unit.dump();  // 600 steps, a round every 25
    int agreeing = 0;
    for (const auto& w : unit["workers"])
      if (w["round"] == unit["round"] && w["digest"] == unit["keeper_digest"]) ++agreeing;
    EXPECT_EQ(agreeing, 2) << unit.dump();
    final_digest[unit["id"].get<std::uint32_t>()] = unit["keeper_digest"];
  }
  shut_down(ep, head);

  const auto stores = keeper_stores(dir, head_dir, nodes.size());
  std::map<std::string, std::set<std::uint32_t>> groups_in_store;  // a node's store -> unit mod 2
  for (std::uint32_t unit = 0; unit < 4; ++unit) {
    const auto copies = unit_copies(stores, unit);
    expect_every_round_on_two_machines(copies, 24, final_digest[unit]);
    for (const auto& [round, held] : copies)
      for (const auto& [path, digest] : held)
        if (path != head_dir + "/db") groups_in_store[path].insert(unit % 2);  // the head's stands in for any
  }
  EXPECT_GE(groups_in_store.size(), 4u) << "every replica's store holds rounds";
  for (const auto& [path, groups] : groups_in_store) EXPECT_EQ(groups.size(), 1u) << path << " holds two groups' units";
}

// `atoll leave` and SIGTERM drain a node: it says goodbye, its coordinator moves at once,
// and no round waits for its workers (the lease is the default 20 s; no round may take
// even half of it).
TEST(Failover, LeaveAndSigtermDrainNodesWithoutStallingARound) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  subprocess head(mlp_head(head_dir, 16000, {"--metrics", metrics}), dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 4, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 2)) << head.output();

  auto [bad_code, bad_out] = testing::run_command({ATOLL_BIN, "leave", "99", "--head", ep}, dir.sub("leave99.log"));
  EXPECT_EQ(bad_code, 1);
  EXPECT_NE(bad_out.find("no node 99"), std::string::npos) << bad_out;

  // Leave the node hosting coord/0.
  const std::string host = testing::coordinator_host(ep);
  subprocess* leaver = testing::process_of(ep, host, nodes);
  ASSERT_NE(leaver, nullptr);
  auto [code, out] = testing::run_command({ATOLL_BIN, "leave", host.substr(5), "--head", ep}, dir.sub("leave.log"));
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(leaver->wait(15s), 0) << leaver->output();

  // SIGTERM another node.
  subprocess* stopped = nodes[0].get() != leaver ? nodes[0].get() : nodes[1].get();
  stopped->signal(SIGTERM);
  EXPECT_EQ(stopped->wait(15s), code_of(exit_status::drained)) << stopped->output();
  const int round_after_leaves = testing::round_of(ep);

  for (auto& n : nodes) {
    if (n.get() == leaver || n.get() == stopped) continue;
    ASSERT_EQ(n->wait(90s), 0) << n->output() << head.output();
  }
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished");
  for (const auto& m : status["members"]) EXPECT_EQ(m["state"], "left") << status["members"].dump();
  const json fragments = ask(ep, "fragments");
  EXPECT_GT(fragments[0]["round"].get<int>(), round_after_leaves);
  // Both nodes that stayed took part to the end and hold the keeper's bytes.
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();

  // No round waited for a lease.
  double longest = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    const auto j = json::parse(line, nullptr, false);
    if (j.is_object() && j.value("type", "") == "round") longest = std::max(longest, j.value("duration_s", 0.0));
  }
  EXPECT_GT(longest, 0.0);  // the metrics were read
  EXPECT_LT(longest, 10.0);
  shut_down(ep, head);
}

// `atoll join` against a running cluster: the node is admitted, its worker fetches the
// committed state in chunks from the keeper, takes part in later rounds, and ends with the
// same digest as the others.
TEST(Failover, ANodeJoiningMidRunTakesPartAndAgrees) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head"), metrics = dir.sub("metrics.jsonl");
  // 577 parameters in chunks of 64: the joiner fetches its state from the keepers.
  subprocess head(mlp_head(head_dir, 12000, {"--metrics", metrics, "--set", "diloco.state_chunk_values=64"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 2, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();
  subprocess joiner({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("joiner.log"));

  // `atollctl members` shows the joiner going joining -> syncing -> active, in that order
  // (a poll may miss the short early states), while the run goes on.
  const std::vector<std::string> order = {"joining", "syncing", "active"};
  std::vector<std::string> seen;
  EXPECT_TRUE(testing::eventually(
      [&] {
        for (const auto& m : ask(ep, "members")) {
          if (m["node_id"] != 3) continue;
          const std::string state = m["state"];
          if (seen.empty() || seen.back() != state) seen.push_back(state);
          return state == "active";
        }
        return false;
      },
      60s, 20ms));
  std::size_t rank = 0;
  for (const auto& state : seen) {
    const auto at = std::find(order.begin(), order.end(), state);
    ASSERT_NE(at, order.end()) << state;
    EXPECT_GE(static_cast<std::size_t>(at - order.begin()), rank) << "went back to " << state;
    rank = static_cast<std::size_t>(at - order.begin());
  }

  for (auto& n : nodes) EXPECT_EQ(n->wait(120s), 0) << n->output();
  EXPECT_EQ(joiner.wait(120s), 0) << joiner.output() << head.output();
  const json fragments = ask(ep, "fragments");
  ASSERT_EQ(fragments[0]["workers"].size(), 3u) << fragments.dump();
  EXPECT_EQ(agreeing_at_final_round(fragments), 3) << fragments.dump();
  // The joiner (worker/3.0) contributed to rounds after it joined: the coordinator's round
  // reports list it as a participant.
  const int joiner_rounds = rounds_with(metrics, "worker/3.0");
  EXPECT_GE(joiner_rounds, 3) << "the joiner took part in " << joiner_rounds << " rounds\n" << joiner.output();

  // It started warm: the AdamW moments and step it holds (read back after installing
  // them, 1154 values in chunks of 64) are the bytes its donor lent, at the donor's step.
  std::smatch took, lent;
  const std::string joiner_log = joiner.output();
  ASSERT_TRUE(std::regex_search(joiner_log, took,
                                std::regex("worker/3.0: starting at step \\d+ warm: inner-optimizer state of (\\d+) "
                                           "values at AdamW step (\\d+) from (worker/\\d+\\.0), digest ([0-9a-f]+)\n")))
      << joiner_log;
  EXPECT_EQ(took[1], "1154");
  // The two nodes join concurrently, so which one became node/1 is found from their logs.
  std::string donor_log;
  for (const auto& n : nodes)
    if (n->output().find(std::string(took[3]) + ": threads") != std::string::npos) donor_log = n->output();
  ASSERT_FALSE(donor_log.empty()) << "no node ran " << took[3];
  ASSERT_TRUE(
      std::regex_search(donor_log, lent,
                        std::regex(std::string(took[3]) + ": lending its inner-optimizer state to worker/3.0: "
                                                          "(\\d+) values at AdamW step (\\d+), digest ([0-9a-f]+)")))
      << donor_log;
  EXPECT_EQ(lent[1], took[1]);
  EXPECT_EQ(lent[2], took[2]);  // the donor's step count
  EXPECT_GT(std::stol(took[2]), 0);
  EXPECT_EQ(lent[3], took[4]) << "the joiner holds other moments than its donor lent";
  shut_down(ep, head);
}

// SIGSTOP a node past its lease, then SIGCONT: it is declared dead, its stale messages are
// refused, it registers again as a new node, and its new worker resyncs and agrees.
TEST(Failover, ANodeStoppedPastItsLeaseIsFencedAndRejoins) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(mlp_head(head_dir, 16000, {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 2)) << head.output();

  // Stop a node that does not host the coordinator.
  const std::string host = testing::coordinator_host(ep);
  subprocess* frozen = nullptr;
  int frozen_id = 0;
  for (const auto& m : ask(ep, "members")) {
    const std::string node = "node/" + std::to_string(m["node_id"].get<int>());
    if (node != host && !frozen) {
      frozen = testing::process_of(ep, node, nodes);
      frozen_id = m["node_id"].get<int>();
    }
  }
  ASSERT_NE(frozen, nullptr);
  frozen->signal(SIGSTOP);
  // While its lease runs, `atollctl explain` says the round waits for the stopped worker.
  json explained;
  const bool names_it = testing::eventually(
      [&] {
        explained = ask(ep, "explain");
        for (const auto& f : explained)
          for (const auto& m : f["missing"])
            if (m["node_id"] == frozen_id && f["waiting_for"] == "participants") return true;
        return false;
      },
      10s, 50ms);
  EXPECT_TRUE(names_it) << explained.dump();
  EXPECT_NE(explained.dump().find("worker/" + std::to_string(frozen_id) + ".0"), std::string::npos) << explained.dump();
  const bool declared_dead = testing::eventually(
      [&] {
        for (const auto& m : ask(ep, "members"))
          if (m["state"] == "dead") return true;
        return false;
      },
      10s, 100ms);
  EXPECT_TRUE(declared_dead);
  // The run's conditions say so (issue 69): still training, degraded by a dead member.
  const auto condition = [](const json& status, const std::string& type) {
    for (const auto& c : status["conditions"])
      if (c["type"] == type) return c;
    return json();
  };
  const json degraded = ask(ep, "status");
  EXPECT_EQ(condition(degraded, "Training")["status"], true) << degraded["conditions"].dump();
  EXPECT_EQ(condition(degraded, "Degraded")["status"], true) << degraded["conditions"].dump();
  EXPECT_EQ(condition(degraded, "Degraded")["reason"], "MembersDead") << degraded["conditions"].dump();
  std::this_thread::sleep_for(1s);  // a round or two go on without it
  frozen->signal(SIGCONT);

  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
  EXPECT_NE(frozen->output().find("registering again"), std::string::npos) << frozen->output();
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished");
  EXPECT_EQ(condition(status, "Finished")["status"], true) << status["conditions"].dump();
  EXPECT_EQ(condition(status, "Training")["status"], false) << status["conditions"].dump();
  EXPECT_EQ(status["members"].size(), 4u) << status["members"].dump();  // the frozen node came back as a new one
  EXPECT_GE(status["refused"]["total"].value("stale_epoch", 0), 1) << status["refused"].dump();
  const json fragments = ask(ep, "fragments");
  // The two that kept going and the one that came back all end at the final round.
  EXPECT_EQ(agreeing_at_final_round(fragments), 3) << fragments.dump();
  shut_down(ep, head);
}

// A killed node closes its connection to the head at once: the head asks it to answer and
// declares it dead when cluster.confirm_ms (500 ms) passes, long before its lease (4 s
// here). A stopped node's connection stays open: only its lease tells, and not before.
TEST(Failover, AKilledNodeIsDeadWithinASecondAndAStoppedOneOnlyAtItsLease) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(mlp_head(head_dir, 100000, {"--set", "cluster.heartbeat_ms=500", "--set", "cluster.lease_ms=4000"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  ASSERT_TRUE(testing::wait_for_round(ep, 2)) << head.output();
  // The member of a node's process (by pid), and how long until the head calls it dead.
  const auto member_of = [&](subprocess& p) {
    for (const auto& m : ask(ep, "members"))
      if (m["pid"] == p.pid()) return m["node_id"].get<int>();
    return -1;
  };
  const auto time_until_dead = [&](int node_id, std::chrono::milliseconds within) {
    const auto from = std::chrono::steady_clock::now();
    testing::eventually(
        [&] {
          for (const auto& m : ask(ep, "members"))
            if (m["node_id"] == node_id && m["state"] == "dead") return true;
          return false;
        },
        within, 20ms);
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - from);
  };

  const int killed = member_of(*nodes[0]);
  ASSERT_GT(killed, 0);
  nodes[0]->signal(SIGKILL);
  const auto kill_seen = time_until_dead(killed, 10s);
  EXPECT_LT(kill_seen, 1500ms) << "the lease is 4 s; the closed connection should tell within confirm_ms";
  EXPECT_NE(head.output().find("did not answer within cluster.confirm_ms"), std::string::npos) << head.output();
  std::cout << "killed node seen dead after " << kill_seen.count() << " ms\n";

  const int stopped = member_of(*nodes[1]);
  ASSERT_GT(stopped, 0);
  nodes[1]->signal(SIGSTOP);
  const auto stop_seen = time_until_dead(stopped, 10s);
  nodes[1]->signal(SIGCONT);
  EXPECT_GE(stop_seen, 3000ms)
      << "a stopped node is alive until its lease (4 s, its last heartbeat up to 0.5 s before)";
  EXPECT_LT(stop_seen, 4500ms) << "at the lease's end (and the 20 ms poll)";
  EXPECT_NE(head.output().find("missed its lease"), std::string::npos) << head.output();
  std::cout << "stopped node seen dead after " << stop_seen.count() << " ms\n";
  shut_down(ep, head);
}

// SIGKILL the head mid-run and start it again on the same address and run dir. The
// registry reloads membership, epoch and coordinator placements from RocksDB; nodes keep
// training and reconnect by themselves; coordinators commit the rounds the dead head never
// acknowledged. No committed round is lost or repeated, and the run finishes (S1, S3, L1).
// `keepers` is storage.keepers: with nodes, the nodes have run dirs and hold every round.
void head_killed_mid_run_is_restarted(const std::string& keepers) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  auto head = std::make_unique<subprocess>(
      mlp_head(head_dir, 16000, {"--set", "storage.keep_rounds=100", "--set", "storage.keepers=" + keepers}),
      dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, *head);
  ASSERT_FALSE(ep.empty()) << head->output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 2, dir, keepers == "nodes");
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head->output();
  const int epoch_before = ask(ep, "status")["epoch"];

  head->signal(SIGKILL);
  EXPECT_EQ(head->wait(5s), 128 + SIGKILL);
  std::this_thread::sleep_for(500ms);  // the nodes train on, their messages queue or drop
  std::remove((head_dir + "/head.endpoint").c_str());
  head = std::make_unique<subprocess>(std::vector<std::string>{ATOLL_BIN, "up", "--listen", ep, "--run-dir", head_dir},
                                      dir.sub("head2.log"));
  ASSERT_EQ(testing::wait_for_endpoint(head_dir, *head), ep) << head->output();

  for (auto& n : nodes) ASSERT_EQ(n->wait(120s), 0) << n->output() << head->output();
  // Each node saw its link come back and had its workers resend what they waited on.
  for (auto& n : nodes) EXPECT_NE(n->output().find("the link to the head came back"), std::string::npos) << n->output();
  const json status = ask(ep, "status");
  EXPECT_EQ(status["state"], "finished") << status.dump();
  EXPECT_GE(status["epoch"].get<int>(), epoch_before);  // S3: the epoch did not go back
  EXPECT_EQ(status["members"].size(), 2u) << status["members"].dump();  // nobody registered twice
  const json fragments = ask(ep, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40);  // 16000 steps / 400: every round, none lost
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();
  if (keepers == "head") testing::expect_every_round_kept(ep, 40);
  shut_down(ep, *head);
  if (keepers != "nodes") return;
  // No commit crossed the head's link, before the kill or after the restart.
  testing::expect_every_round_on_two_replicas(ATOLL_BIN, dir, 40, head_dir);
}

TEST(Failover, AHeadKilledMidRunIsRestartedAndTheNodesCarryOn) { head_killed_mid_run_is_restarted("head"); }

TEST(Failover, AHeadKilledMidRunIsRestartedWithTheKeepersOnNodes) { head_killed_mid_run_is_restarted("nodes"); }

// The workers' own record of what each contribution trained on (their ATOLL_LOG=debug line,
// actors/worker/steps.hpp): (worker, unit, round) -> (epoch, position) of every unit.
using data_record = std::map<std::tuple<std::string, std::uint32_t, std::uint64_t>,
                             std::vector<std::pair<std::uint64_t, std::uint64_t>>>;
data_record contributions_logged(const std::string& log) {
  data_record record;
  const std::regex line(R"((worker/\d+\.\d+): data of unit (\d+) round (\d+):([ 0-9:-]*))");
  const std::regex piece(R"((\d+):\d+:(\d+)-(\d+))");
  for (std::sregex_iterator it(log.begin(), log.end(), line), end; it != end; ++it) {
    auto& positions = record[{(*it)[1], std::stoul((*it)[2]), std::stoull((*it)[3])}];
    const std::string pieces = (*it)[4];
    for (std::sregex_iterator p(pieces.begin(), pieces.end(), piece); p != end; ++p)
      for (auto pos = std::stoull((*p)[2]); pos < std::stoull((*p)[3]); ++pos)
        positions.emplace_back(std::stoull((*p)[1]), pos);
  }
  return record;
}

// run.data_cursor under a random schedule (its seed printed; ATOLL_SCHEDULE_SEED=S replays
// the order): of three nodes one leaves (SIGTERM), one is SIGKILLed and a fourth joins,
// and the head is SIGKILLed between two of them and restarted on the same run dir, the
// event after its kill falling while it is down on odd seeds. The ledger the export writes
// must hold no unit twice for a fragment, and exactly the units of the contributions the
// committed rounds took, by the workers' own record (their logs) and the rounds the
// coordinators reported (the metrics file): none lost, none from nowhere.
TEST(Failover, WithTheDataCursorARandomScheduleOfFaultsLosesNoUnitAndLearnsNoneTwice) {
  const char* fixed = std::getenv("ATOLL_SCHEDULE_SEED");
  const std::uint64_t seed =
      fixed ? std::strtoull(fixed, nullptr, 10)
            : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) % 1000000;
  std::cout << "schedule seed " << seed << " (replay: ATOLL_SCHEDULE_SEED=" << seed << ")\n";
  std::mt19937_64 rng(seed);
  ::setenv("ATOLL_LOG", "debug", 1);  // every process started below logs its contributions' data
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  const std::vector<std::string> run = {"--set", "run.steps=80",         "--set", "run.min_workers=2",
                                        "--set", "run.data_cursor=true", "--set", "run.seed=7",
                                        "--set", "inner.batch_size=8",   "--set", "diloco.sync_every=10",
                                        "--set", "diloco.fragments=2",   "--set", "run.eval_every=1000"};
  std::vector<std::string> first = {ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir};
  first.insert(first.end(), run.begin(), run.end());
  auto head = std::make_unique<subprocess>(first, dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, *head);
  ASSERT_FALSE(ep.empty()) << head->output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir);
  const bool leasing = testing::eventually(
      [&] {
        const json status = ask(ep, "status");
        if (status.is_null() || status["workers"].size() != 3 || !status["data"]["leasing"].get<bool>()) return false;
        for (const auto& w : status["workers"])
          if (w["step"].get<int>() < 15) return false;
        return true;
      },
      60s, 100ms);
  ASSERT_TRUE(leasing) << head->output();

  std::vector<std::string> events = {"leave", "kill", "join"};
  std::shuffle(events.begin(), events.end(), rng);
  const auto head_kill_before = rng() % (events.size() + 1);  // the head's kill goes before this event
  const bool next_while_down = seed % 2 == 1;
  std::string order;
  for (std::size_t i = 0; i <= events.size(); ++i) {
    bool restart = false;
    if (i == head_kill_before) {
      order += "head-kill ";
      head->signal(SIGKILL);
      EXPECT_EQ(head->wait(5s), 128 + SIGKILL);
      std::this_thread::sleep_for(300ms);  // reports and leases on their way are lost
      restart = true;
      if (!next_while_down || i == events.size()) {
        order += "head-restart ";
        restart = false;
        std::remove((head_dir + "/head.endpoint").c_str());
        head = std::make_unique<subprocess>(
            std::vector<std::string>{ATOLL_BIN, "up", "--listen", ep, "--run-dir", head_dir}, dir.sub("head2.log"));
        ASSERT_EQ(testing::wait_for_endpoint(head_dir, *head), ep) << head->output();
      }
    }
    if (i == events.size()) break;
    order += events[i] + " ";
    if (events[i] == "leave") {
      nodes[0]->signal(SIGTERM);
    } else if (events[i] == "kill") {
      nodes[2]->signal(SIGKILL);
      EXPECT_EQ(nodes[2]->wait(5s), 128 + SIGKILL);
    } else {
      nodes.push_back(std::make_unique<subprocess>(
          std::vector<std::string>{ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node3.log")));
    }
    if (restart) {
      order += "head-restart ";
      std::remove((head_dir + "/head.endpoint").c_str());
      head = std::make_unique<subprocess>(
          std::vector<std::string>{ATOLL_BIN, "up", "--listen", ep, "--run-dir", head_dir}, dir.sub("head2.log"));
      ASSERT_EQ(testing::wait_for_endpoint(head_dir, *head), ep) << head->output();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500 + rng() % 1500));
  }
  ::unsetenv("ATOLL_LOG");
  std::cout << "schedule: " << order << "\n";
  EXPECT_EQ(nodes[0]->wait(30s), code_of(exit_status::drained)) << "the node that left: " << nodes[0]->output();
  for (std::size_t i : {std::size_t{1}, std::size_t{3}})
    ASSERT_EQ(nodes[i]->wait(150s), 0) << order << nodes[i]->output() << head->output();

  const json data = ask(ep, "data");
  ASSERT_FALSE(data.is_null());
  for (const auto& c : data["chunks"]) EXPECT_EQ(c["holder"], "") << order << ": every chunk settled at the end";
  const auto units = data["units"].get<std::uint64_t>();
  auto [code, out] = testing::run_command(
      {ATOLL_BIN, "export", "--run-dir", head_dir, "--out", dir.sub("model.pt"), "--ledger", dir.sub("ledger.json")},
      dir.sub("export.log"));
  ASSERT_EQ(code, 0) << out;
  // sync unit -> (epoch, data unit). The default reduces rounds in slices: a sync unit is
  // slice s of fragment p, p * shards + s, as the metrics and the workers' logs name it.
  std::map<std::uint32_t, std::multiset<std::pair<std::uint64_t, std::uint64_t>>> ledger;
  std::ifstream ledger_file(dir.sub("ledger.json"));
  const json exported = json::parse(ledger_file);
  const auto shards = exported["shards"].get<std::uint32_t>();
  for (const auto& e : exported["epochs"])
    for (const auto& c : e["consumed"])
      for (const auto& u : c["units"])
        ledger[c["fragment"].get<std::uint32_t>() * shards + c.value("slice", 0u)].insert(
            std::make_pair(e["epoch"].get<std::uint64_t>(), u.get<std::uint64_t>()));

  data_record record;
  for (const auto& n : nodes) record.merge(contributions_logged(n->output()));
  std::map<std::uint32_t, std::set<std::pair<std::uint64_t, std::uint64_t>>> taken;  // by the reported rounds
  std::ifstream metrics(head_dir + "/metrics.jsonl");
  std::size_t rounds = 0;
  for (std::string line; std::getline(metrics, line);) {
    const auto j = json::parse(line);
    if (j["type"] != "round") continue;
    ++rounds;
    const std::uint32_t f = j["fragment"];
    const std::uint64_t r = j["round"];
    const auto take = [&](const std::string& worker, std::uint64_t round) {
      auto it = record.find({worker, f, round});
      ASSERT_TRUE(it != record.end()) << worker << " logged no data for unit " << f << " round " << round;
      for (const auto& [epoch, position] : it->second)
        taken[f].insert({epoch, data::unit_at(7, epoch, position, units)});
    };
    for (const auto& w : j["workers"]) take(w, r);
    for (const auto& [w, weight] : j["late"].items()) take(w, r - 1);
  }
  ASSERT_GT(rounds, 4u);
  ASSERT_EQ(ledger.size(), 2u * shards) << "every slice of both fragments learned units";
  for (const auto& [f, learned] : ledger) {
    const std::set<std::pair<std::uint64_t, std::uint64_t>> once(learned.begin(), learned.end());
    EXPECT_EQ(once.size(), learned.size()) << "unit " << f << ": a unit learned twice";
    EXPECT_EQ(once, taken[f]) << "unit " << f << ": the ledger is not what the reported rounds took";
  }
  shut_down(ep, *head);
}

// Keeper replication with storage.keepers = head: nodes with a run dir may host keeper/1,
// and every commit needs its acknowledgement as well as the head's. SIGKILL the replica's node mid-run: the registry
// places keeper/1 on another node, which catches up from the head's keeper, and the run
// finishes. The dead replica's disk holds every round released before the kill (S4: an
// acknowledged round is on two machines), and the new replica ends with the final round.
TEST(Failover, AReplicaKeeperHoldsEveryAcknowledgedRoundAndMovesWhenItsNodeDies) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  auto args = testing::fast_lease_head(head_dir);
  args.insert(args.end(), {"--set", "storage.keepers=head"});
  subprocess head(args, dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir, true);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();

  auto replica_host = [&] {
    const json keepers = ask(ep, "status")["keepers"];
    return keepers.size() == 2 ? keepers[1]["on"].get<std::string>() : std::string();
  };
  const std::string first_host = replica_host();
  ASSERT_FALSE(first_host.empty()) << ask(ep, "status").dump();
  subprocess* victim = testing::process_of(ep, first_host, nodes);
  ASSERT_NE(victim, nullptr);
  const int released_before_kill = testing::round_of(ep);
  victim->signal(SIGKILL);
  EXPECT_EQ(victim->wait(5s), 128 + SIGKILL);

  for (auto& n : nodes) {
    if (n.get() != victim) {
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  }
  const std::string second_host = replica_host();
  EXPECT_FALSE(second_host.empty());
  EXPECT_NE(second_host, first_host);
  const json fragments = ask(ep, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40);
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();
  testing::expect_every_round_kept(ep, 40);
  std::map<std::int64_t, std::string> head_digests;
  for (const auto& c : ask(ep, "checkpoints")) head_digests[c["round"].get<std::int64_t>()] = c["digest"];
  shut_down(ep, head);

  // Each replica's RocksDB, read after its process is gone.
  auto replica_latest = [&](const subprocess* process) -> std::pair<std::int64_t, std::string> {
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].get() != process) continue;
      auto db = open_rocksdb_store(dir.sub("node" + std::to_string(i)) + "/keeper-1");
      if (!db) return {-1, db.err().describe()};
      checkpoint_store store(**db, 100);
      auto latest = store.latest(0);
      if (!latest || !*latest) return {-1, "empty"};
      const auto& theta = (*latest)->theta;
      return {static_cast<std::int64_t>((*latest)->round),
              digest_hex(digest64(theta.data(), theta.size() * sizeof(float)))};
    }
    return {-1, "no such process"};
  };
  const auto [dead_round, dead_digest] = replica_latest(victim);
  EXPECT_GE(dead_round, released_before_kill) << dead_digest;
  EXPECT_EQ(dead_digest, head_digests[dead_round]);
  // Round 40 was released only after keeper/1 acknowledged it: some surviving replica
  // holds it (the replica may have moved once more as nodes finished).
  bool final_round_replicated = false;
  for (auto& n : nodes) {
    if (n.get() == victim) continue;
    const auto [round, digest] = replica_latest(n.get());
    if (round == 40) {
      EXPECT_EQ(digest, head_digests[40]);
      final_round_replicated = true;
    }
  }
  EXPECT_TRUE(final_round_replicated);
}

// storage.keepers = nodes: keeper/1 and keeper/2 on two nodes take every commit, and the
// head's link carries no tensor at all: contributions and results go node to node, and so
// do the commits. SIGKILL keeper/2's node (it may host coord/0 too): keeper/2 moves to
// the third node, catching up from keeper/1 node to node, and a re-placed coordinator
// resumes from the newest round any keeper holds. Every released round is on two machines
// (S4), the workers agree at the final round (S1), and `atoll export` finds the final round
// on the replicas' disks.
TEST(Failover, WithKeepersOnNodesNoTensorCrossesTheHeadAndAKilledReplicaMovesNodeToNode) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  auto args = mlp_head(head_dir, 16000,
                       {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=2000", "--set",
                        "storage.keep_rounds=100", "--set", "storage.keepers=nodes"});
  subprocess head(args, dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 3, dir, true);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();

  const auto keepers = [&] { return ask(ep, "status")["keepers"]; };
  const auto host_of = [](const json& keepers, const std::string& id) {
    for (const auto& k : keepers)
      if (k["id"] == id) return k["on"].get<std::string>();
    return std::string();
  };
  const auto head_tensor_bytes = [&] {
    const json link = ask(ep, "status")["head_link"];
    return link["tensor_bytes_in"].get<std::uint64_t>() + link["tensor_bytes_out"].get<std::uint64_t>();
  };
  const json placed = keepers();
  ASSERT_EQ(placed.size(), 3u) << placed.dump();
  EXPECT_EQ(placed[0]["id"], "keeper/0");
  EXPECT_FALSE(placed[0]["commits"].get<bool>()) << placed.dump();
  EXPECT_TRUE(placed[1]["commits"].get<bool>() && placed[2]["commits"].get<bool>()) << placed.dump();
  const std::string first_host = host_of(placed, "keeper/1"), second_host = host_of(placed, "keeper/2");
  EXPECT_NE(first_host, second_host);
  EXPECT_EQ(head_tensor_bytes(), 0u);

  subprocess* victim = testing::process_of(ep, second_host, nodes);
  ASSERT_NE(victim, nullptr);
  const int released_before_kill = testing::round_of(ep);
  victim->signal(SIGKILL);
  EXPECT_EQ(victim->wait(5s), 128 + SIGKILL);
  ASSERT_TRUE(testing::wait_for_round(ep, released_before_kill + 3)) << head.output();
  const json moved = keepers();
  const std::string new_host = host_of(moved, "keeper/2");
  EXPECT_FALSE(new_host.empty()) << moved.dump();
  EXPECT_NE(new_host, second_host);
  EXPECT_NE(new_host, host_of(moved, "keeper/1"));
  EXPECT_EQ(head_tensor_bytes(), 0u) << "tensors crossed the head while keeper/2 moved";

  for (auto& n : nodes) {
    if (n.get() != victim) {
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  }
  const json fragments = ask(ep, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40);
  EXPECT_EQ(fragments[0]["keeper_round"], 40) << fragments.dump();
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();
  EXPECT_EQ(head_tensor_bytes(), 0u);
  const std::string final_digest = fragments[0]["keeper_digest"];
  shut_down(ep, head);

  // Every store's rounds, read after the processes are gone: each round from 1 to 40 is on
  // two machines at least, and every copy of a round holds the same bytes.
  const auto copies = fragment0_copies(keeper_stores(dir, head_dir, nodes.size()));
  expect_every_round_on_two_machines(copies, 40, final_digest);

  // The export reads the replicas under the run dir: the head's store alone is behind.
  auto [code, out] = testing::run_command(
      {ATOLL_BIN, "export", "--run-dir", dir.str(), "--out", dir.sub("model.pt"), "--json"}, dir.sub("export.log"));
  ASSERT_EQ(code, 0) << out;
  const json manifest = json::parse(out.substr(out.find('{')));
  EXPECT_EQ(manifest["fragments"][0]["round"], 40) << manifest.dump();
  EXPECT_EQ(manifest["fragments"][0]["digest"], final_digest) << manifest.dump();

  // `--list` names every store that holds a round: the final one is on two replicas.
  auto [list_code, list_out] =
      testing::run_command({ATOLL_BIN, "export", "--run-dir", dir.str(), "--list", "--json"}, dir.sub("list.log"));
  ASSERT_EQ(list_code, 0) << list_out;
  const json listed = json::parse(list_out.substr(list_out.find('[')));
  const auto last = std::find_if(listed.begin(), listed.end(), [](const json& r) { return r["round"] == 40; });
  ASSERT_NE(last, listed.end()) << listed.dump();
  EXPECT_EQ((*last)["digest"], final_digest);
  EXPECT_EQ((*last)["stores"].size(), copies.at(40).size()) << last->dump();
}

// A replica's host that leaves hands its replica over first: `atoll leave` on keeper/1's
// node, then SIGTERM on keeper/2's. Each time the registry places a new replica (keeper/3,
// then keeper/4) on another node that can keep, it catches up node to node while rounds go
// on, and only then is the leaving node told to stop: the head's log promotes the new
// replica before the node's goodbye. Every released round stays on two machines with one
// digest (S4), no tensor crosses the head, and the two nodes left finish in agreement (S1).
TEST(Failover, WithKeepersOnNodesALeavingReplicaHostHandsItsReplicaOverFirst) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(mlp_head(head_dir, 16000,
                           {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=3000", "--set",
                            "storage.keep_rounds=100", "--set", "storage.keepers=nodes"}),
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 4, dir, true);
  ASSERT_TRUE(testing::wait_for_round(ep, 3)) << head.output();
  ASSERT_TRUE(testing::eventually([&] { return ask(ep, "members").size() == 4u; }, 60s, 50ms)) << head.output();

  const auto host_of = [&](const std::string& id) {
    const json status = ask(ep, "status");
    for (const auto& k : status["keepers"])
      if (k["id"] == id) return k["on"].get<std::string>();
    return std::string();
  };
  const auto head_tensor_bytes = [&] {
    const json link = ask(ep, "status")["head_link"];
    return link["tensor_bytes_in"].get<std::uint64_t>() + link["tensor_bytes_out"].get<std::uint64_t>();
  };
  // The registry's log says the new replica took the place before the old host left.
  const auto promoted_before_goodbye = [&](const std::string& incoming, const std::string& leaving_node) {
    const std::string log = head.output();
    const auto promoted = log.find(incoming + " on ");
    const auto caught_up = log.find("caught up and takes the place of", promoted);
    const auto left = log.find("node " + leaving_node.substr(5) + " left");
    return promoted != std::string::npos && caught_up != std::string::npos && left != std::string::npos &&
           caught_up < left;
  };

  // `atoll leave` on keeper/1's host.
  const std::string first_host = host_of("keeper/1"), second_host = host_of("keeper/2");
  ASSERT_FALSE(first_host.empty());
  ASSERT_FALSE(second_host.empty());
  subprocess* leaver = testing::process_of(ep, first_host, nodes);
  ASSERT_NE(leaver, nullptr);
  auto [code, out] =
      testing::run_command({ATOLL_BIN, "leave", first_host.substr(5), "--head", ep}, dir.sub("leave.log"));
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("hosts a keeper replica"), std::string::npos) << out;
  EXPECT_EQ(leaver->wait(60s), 0) << leaver->output() << head.output();
  ASSERT_TRUE(testing::eventually([&] { return promoted_before_goodbye("keeper/3", first_host); }, 10s, 50ms))
      << head.output();
  const std::string third_host = host_of("keeper/3");
  EXPECT_TRUE(host_of("keeper/1").empty());
  EXPECT_FALSE(third_host.empty());
  EXPECT_NE(third_host, first_host);
  EXPECT_NE(third_host, second_host);
  const int round_after_leave = testing::round_of(ep);

  // SIGTERM on keeper/2's host: the same hand-over, asked by the node itself.
  subprocess* stopped = testing::process_of(ep, second_host, nodes);
  ASSERT_NE(stopped, nullptr);
  ASSERT_TRUE(testing::wait_for_round(ep, round_after_leave + 2)) << head.output();
  stopped->signal(SIGTERM);
  EXPECT_EQ(stopped->wait(60s), code_of(exit_status::drained)) << stopped->output() << head.output();
  ASSERT_TRUE(testing::eventually([&] { return promoted_before_goodbye("keeper/4", second_host); }, 10s, 50ms))
      << head.output();
  const std::string fourth_host = host_of("keeper/4");
  EXPECT_FALSE(fourth_host.empty());
  EXPECT_NE(fourth_host, third_host);

  for (auto& n : nodes) {
    if (n.get() != leaver && n.get() != stopped) {
      ASSERT_EQ(n->wait(120s), 0) << n->output() << head.output();
    }
  }
  const json fragments = ask(ep, "fragments");
  EXPECT_EQ(fragments[0]["round"], 40);
  EXPECT_EQ(fragments[0]["keeper_round"], 40) << fragments.dump();
  EXPECT_EQ(agreeing_at_final_round(fragments), 2) << fragments.dump();
  EXPECT_EQ(head_tensor_bytes(), 0u) << "the hand-overs sent tensors through the head";
  const std::string final_digest = fragments[0]["keeper_digest"];
  shut_down(ep, head);

  const auto copies = fragment0_copies(keeper_stores(dir, head_dir, nodes.size()));
  expect_every_round_on_two_machines(copies, 40, final_digest);
}

// With storage.keepers = nodes, the two replica hosts finish their steps while a third
// worker has not: its node (no run dir, so it cannot keep) is SIGSTOPped within its lease,
// and rounds close at their deadline without it. The replicas hold the only two copies of
// the newest rounds, so their nodes stay, serving them, until the run finishes; then the
// registry stops them and every process exits cleanly without `atoll down`. (Before, they
// left with their workers: the head's keeper, behind, was all that was left, and the chaos
// bench saw such a run never finish.)
TEST(Failover, WithKeepersOnNodesTheReplicaHostsStayUntilTheLastWorkerFinishes) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head(
      mlp_head(head_dir, 16000,
               {"--set", "cluster.heartbeat_ms=300", "--set", "cluster.lease_ms=60000", "--set",
                "diloco.round_deadline_ms=500", "--set", "storage.keep_rounds=100", "--set", "storage.keepers=nodes"}),
      dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  auto nodes = testing::join_nodes(ATOLL_BIN, ep, 2, dir, true);
  // Training starts with these two, so coord/0 is on one of them, not on the node stopped.
  ASSERT_TRUE(testing::eventually([&] { return ask(ep, "status")["state"] == "training"; }, 60s, 20ms))
      << head.output();
  subprocess third({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("third.log"));
  ASSERT_TRUE(testing::eventually(
      [&] {
        for (const auto& m : ask(ep, "members"))
          if (m["node_id"] == 3) return m["state"] == "active";
        return false;
      },
      60s, 20ms))
      << head.output();
  third.signal(SIGSTOP);

  const auto done_of = [&](const std::string& id) {
    const json status = ask(ep, "status");  // held: a range over a temporary's member dangles
    for (const auto& w : status["workers"])
      if (w["id"] == id) return w["done"].get<bool>();
    return false;
  };
  ASSERT_TRUE(testing::eventually([&] { return done_of("worker/1.0") && done_of("worker/2.0"); }, 120s, 50ms))
      << head.output();
  std::this_thread::sleep_for(2s);  // past several heartbeats: a node on its way out has left
  EXPECT_EQ(ask(ep, "status")["state"], "training") << "worker/3.0 has steps left";
  for (auto& n : nodes) EXPECT_TRUE(n->running()) << "a replica host left with its workers\n" << n->output();

  third.signal(SIGCONT);
  EXPECT_EQ(third.wait(120s), 0) << third.output() << head.output();
  for (auto& n : nodes) EXPECT_EQ(n->wait(30s), 0) << "not stopped when the run finished\n" << n->output();
  const json fragments = ask(ep, "fragments");
  const int final_round = fragments[0]["round"];
  // worker/3.0 caught up to the final round from the replicas, which had to be there.
  EXPECT_EQ(agreeing_at_final_round(fragments), 3) << fragments.dump();
  EXPECT_EQ(fragments[0]["keeper_round"], final_round) << fragments.dump();
  shut_down(ep, head);

  // Every round is on both replicas with the same bytes.
  const auto copies = fragment0_copies(keeper_stores(dir, head_dir, nodes.size()));
  for (int round = 1; round <= final_round; ++round) {
    const auto held = copies.find(static_cast<std::uint64_t>(round));
    ASSERT_NE(held, copies.end()) << "round " << round << " is on no disk";
    EXPECT_GE(held->second.size(), 2u) << "round " << round << " is on fewer than two machines";
    for (const auto& [path, digest] : held->second)
      EXPECT_EQ(digest, held->second.begin()->second) << path << " round " << round;
  }
}

}  // namespace
}  // namespace atl
