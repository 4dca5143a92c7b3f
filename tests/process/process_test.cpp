// Process tier: real `atoll` and `atollctl` processes on loopback.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/decisions/data_cursor.hpp"
#include "actors/shared/cursor_record.hpp"
#include "runtime/core/digest.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/registry_store.hpp"
#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::run_command;
using testing::subprocess;
using testing::wait_for_endpoint;
using namespace std::chrono_literals;

const std::vector<std::string> mlp_run = {"--set", "run.example=mlp",      "--set", "run.steps=40",
                                          "--set", "diloco.sync_every=10", "--set", "run.eval_every=20",
                                          "--set", "model.width=32",       "--set", "run.min_workers=2"};

json ctl(const std::string& head, const std::string& command, const std::string& log) {
  auto [code, out] = run_command({ATOLLCTL_BIN, "--head", head, command, "--json"}, log);
  EXPECT_EQ(code, 0) << out;
  auto body = json::parse(out, nullptr, false);
  EXPECT_FALSE(body.is_discarded()) << out;
  return body;
}

std::vector<std::string> with(std::vector<std::string> base, const std::vector<std::string>& more) {
  base.insert(base.end(), more.begin(), more.end());
  return base;
}

// What a finished run's metrics say about its rounds: each unit's released digest per
// round, the digests its workers acknowledged, the held-out losses by step, the summary.
struct run_record {
  std::map<std::pair<int, int>, std::string> released;  // (fragment or unit, round)
  std::map<std::pair<int, int>, std::vector<std::string>> acked;
  std::map<int, double> val_loss;  // by step
  json summary;
};

run_record read_metrics(const std::string& run_dir) {
  run_record r;
  std::ifstream metrics(run_dir + "/metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) {
    const auto j = json::parse(line);
    if (j["type"] == "round") r.released[{j["fragment"], j["round"]}] = j["digest"];
    if (j["type"] == "ack") r.acked[{j["fragment"], j["round"]}].push_back(j["digest"]);
    if (j["type"] == "eval") r.val_loss[j["step"]] = j["val_loss"];
    if (j["type"] == "summary") r.summary = j;
  }
  return r;
}

// Every released round was acknowledged by `workers` workers, each with its digest.
void expect_every_round_agreed(const run_record& run, std::size_t workers) {
  for (const auto& [key, digest] : run.released) {
    auto acked = run.acked.find(key);
    ASSERT_TRUE(acked != run.acked.end()) << "unit " << key.first << " round " << key.second << ": no ack";
    ASSERT_EQ(acked->second.size(), workers) << "unit " << key.first << " round " << key.second;
    for (const auto& d : acked->second) EXPECT_EQ(d, digest) << "unit " << key.first << " round " << key.second;
  }
}

TEST(Process, TwoNodesTrainTheMlpAndAgreeThenARestartedHeadResumes) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  auto head = std::make_unique<subprocess>(
      with({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir}, mlp_run), dir.sub("head.log"));
  const std::string ep = wait_for_endpoint(head_dir, *head);
  ASSERT_FALSE(ep.empty()) << head->output();

  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node2.log"));
  EXPECT_EQ(node1.wait(90s), 0) << node1.output();
  EXPECT_EQ(node2.wait(90s), 0) << node2.output();

  // Every worker and the keeper hold the same theta_global after the last round.
  const json fragments = ctl(ep, "fragments", dir.sub("ctl.log"));
  ASSERT_EQ(fragments.size(), 1u) << fragments.dump();
  const auto& f0 = fragments[0];
  EXPECT_EQ(f0["round"], 4);
  ASSERT_TRUE(f0.contains("keeper_digest")) << f0.dump();
  const std::string keeper_digest = f0["keeper_digest"];
  ASSERT_EQ(f0["workers"].size(), 2u) << f0.dump();
  for (const auto& w : f0["workers"]) {
    EXPECT_EQ(w["round"], 4) << w.dump();
    EXPECT_EQ(w["digest"], keeper_digest) << w.dump();
  }
  const json status = ctl(ep, "status", dir.sub("ctl.log"));
  EXPECT_EQ(status["state"], "finished");
  EXPECT_EQ(status["members"].size(), 2u);
  EXPECT_GE(status["epoch"].get<int>(), 2);
  const std::string cluster_id = status["cluster_id"];
  EXPECT_EQ(cluster_id.size(), 16u);
  const json checkpoints = ctl(ep, "checkpoints", dir.sub("ctl.log"));
  ASSERT_FALSE(checkpoints.empty());
  EXPECT_EQ(checkpoints.back()["round"], 4);
  EXPECT_EQ(checkpoints.back()["digest"], keeper_digest);

  // Kill the head without warning: the committed rounds are in its RocksDB.
  head->signal(SIGKILL);
  EXPECT_EQ(head->wait(10s), 128 + SIGKILL);
  {
    auto db = open_rocksdb_store(head_dir + "/db");
    ASSERT_TRUE(db) << db.err().describe();
    checkpoint_store store(**db, 5);
    auto latest = store.latest(0);
    ASSERT_TRUE(latest && latest->has_value());
    EXPECT_EQ((*latest)->round, 4u);
    EXPECT_EQ(digest_hex(digest64((*latest)->theta.data(), (*latest)->theta.size() * sizeof(float))), keeper_digest);
  }

  // A head started again on the same run dir reports the last committed round.
  head = std::make_unique<subprocess>(
      std::vector<std::string>{ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir},
      dir.sub("head2.log"));
  std::remove((head_dir + "/head.endpoint").c_str());
  const std::string ep2 = wait_for_endpoint(head_dir, *head);
  ASSERT_FALSE(ep2.empty()) << head->output();
  const json resumed = ctl(ep2, "status", dir.sub("ctl.log"));
  EXPECT_EQ(resumed["cluster_id"], cluster_id);
  EXPECT_EQ(resumed["state"], "finished");
  ASSERT_EQ(resumed["fragments"].size(), 1u);
  EXPECT_EQ(resumed["fragments"][0]["round"], 4);

  auto [down_code, down_out] = run_command({ATOLL_BIN, "down", "--head", ep2}, dir.sub("down.log"));
  EXPECT_EQ(down_code, 0) << down_out;
  EXPECT_EQ(head->wait(15s), 0) << head->output();
}

TEST(Process, StreamingWithOverlapAndInt8AgreesAfterEveryRound) {
  testing::temp_dir dir;
  const std::string run_dir = dir.sub("run");
  auto [code, out] = run_command({ATOLL_BIN,   "local",
                                  "--example", "mlp",
                                  "--steps",   "40",
                                  "--run-dir", run_dir,
                                  "--set",     "model.width=32",
                                  "--set",     "diloco.sync_every=10",
                                  "--set",     "diloco.fragments=2",
                                  "--set",     "diloco.overlap=1",
                                  "--set",     "diloco.alpha=0.5",
                                  "--set",     "diloco.codec=int8",
                                  "--set",     "diloco.error_feedback=true",
                                  "--set",     "storage.keep_rounds=100"},
                                 dir.sub("local.log"), 120s);
  ASSERT_EQ(code, 0) << out;
  // Every round of every fragment: the coordinator's digest, each worker's ack.
  auto run = read_metrics(run_dir);
  auto& released = run.released;
  ASSERT_EQ(released.size(), 8u);  // 2 fragments x 4 rounds
  // Both nodes listen: contributions and results went node to node, not through the head
  // (a message sent before the first PeerTable may take the head, but carries no tensor).
  ASSERT_TRUE(run.summary.contains("head_relayed_tensor_bytes")) << run.summary.dump();
  EXPECT_EQ(run.summary["head_relayed_tensor_bytes"], 0) << run.summary.dump();
  expect_every_round_agreed(run, 2);
  // Every keeper (the two replicas on the nodes, and the head's, behind) holds the
  // released bytes for every round it stored, and every round is on two machines.
  std::vector<std::string> stores = {run_dir + "/head/db"};
  for (const char* node : {"/node1", "/node2"})
    for (const auto& entry : std::filesystem::directory_iterator(run_dir + node))
      if (entry.path().filename().string().rfind("keeper-", 0) == 0) stores.push_back(entry.path().string());
  std::map<std::pair<int, int>, int> copies;
  for (const auto& path : stores) {
    auto db = open_rocksdb_store(path);
    ASSERT_TRUE(db) << path << ": " << db.err().describe();
    checkpoint_store store(**db, 100);
    auto stored = store.list();
    ASSERT_TRUE(stored) << path;
    for (const auto& c : *stored) {
      if (c.round == 0) continue;
      const std::pair<int, int> key{static_cast<int>(c.fragment), static_cast<int>(c.round)};
      EXPECT_EQ(digest_hex(c.digest), released[key]) << path;
      ++copies[key];
    }
  }
  for (const auto& [key, digest] : released)
    EXPECT_GE(copies[key], 2) << "fragment " << key.first << " round " << key.second << " is on one machine";
}

// SparseLoCo (diloco.outer = sparseloco) with the paper's settings (outer lr 1, beta 0.95,
// alpha 0; 1/32 of each chunk up, 1/16 down), overlapped by 2 steps that each merge carries
// (diloco.carry_overlap): the run trains (the held-out loss of theta_global ends well below
// the untrained model's, at step 5, before any round) and every worker holds each round's
// digest.
TEST(Process, SparseLoCoTrainsAndEveryWorkerAgreesOnEveryRound) {
  testing::temp_dir dir;
  const std::string run_dir = dir.sub("run");
  auto [code, out] = run_command({ATOLL_BIN,   "local",
                                  "--example", "mlp",
                                  "--steps",   "60",
                                  "--run-dir", run_dir,
                                  "--set",     "model.width=32",
                                  "--set",     "diloco.sync_every=10",
                                  "--set",     "run.eval_every=5",
                                  "--set",     "diloco.outer=sparseloco",
                                  "--set",     "diloco.overlap=2",
                                  "--set",     "diloco.carry_overlap=true",
                                  "--set",     "diloco.outer_lr=1",
                                  "--set",     "diloco.codec=topk32",
                                  "--set",     "diloco.result_codec=topk16",
                                  "--set",     "diloco.codec_chunk=64"},
                                 dir.sub("local.log"), 120s);
  ASSERT_EQ(code, 0) << out;
  const auto run = read_metrics(run_dir);
  EXPECT_EQ(run.released.size(), 6u);  // 60 steps, a round every 10
  expect_every_round_agreed(run, 2);
  ASSERT_TRUE(run.val_loss.count(5) && run.val_loss.count(60)) << out;
  EXPECT_LT(run.val_loss.at(60), 0.85 * run.val_loss.at(5))
      << "untrained " << run.val_loss.at(5) << ", after 6 rounds " << run.val_loss.at(60);
}

// Sharded rounds, the default (diloco.shards = auto: two workers, two slices): the
// fragment's two slices are two sync units, each reduced by its own coordinator, one on
// each node. Every round of every unit is acknowledged by both workers with the released
// digest, the export joins the slices back into the whole model, and the run reaches the
// very model of the same run unsharded (--shards 1: the same held-out loss, to the bit).
TEST(Process, ShardedRoundsAgreeAfterEveryRoundAndReachTheModelOfTheUnshardedRun) {
  testing::temp_dir dir;
  // 18 x 4096 + 1 = 73729 parameters: four and a half 16 Ki granules, cut in two slices.
  const auto train = [&](const std::string& run_dir, const char* shards) {
    return run_command({ATOLL_BIN,   "local",
                        "--example", "mlp",
                        "--steps",   "40",
                        "--run-dir", run_dir,
                        "--set",     std::string("diloco.shards=") + shards,
                        "--set",     "model.width=4096",
                        "--set",     "diloco.sync_every=10",
                        "--set",     "diloco.overlap=1",
                        "--set",     "diloco.alpha=0.5",
                        "--set",     "diloco.codec=int8",
                        "--set",     "diloco.error_feedback=true",
                        "--set",     "run.eval_every=40"},
                       run_dir + ".log", 120s);
  };
  const auto final_loss = [](const std::string& run_dir) {
    const auto losses = read_metrics(run_dir).val_loss;
    return losses.count(40) ? losses.at(40) : -1.0;
  };
  const std::string run_dir = dir.sub("sharded"), unsharded = dir.sub("unsharded");
  auto [code, out] = train(run_dir, "auto");
  ASSERT_EQ(code, 0) << out;
  {
    std::ifstream f(run_dir + "/logs/head.log");
    const std::string log(std::istreambuf_iterator<char>(f), {});
    EXPECT_NE(log.find("diloco.shards = auto: 2 (run.min_workers 2"), std::string::npos) << log;
  }
  const auto run = read_metrics(run_dir);
  const auto& released = run.released;
  ASSERT_EQ(released.size(), 8u);  // 2 units x 4 rounds
  expect_every_round_agreed(run, 2);
  // A slice's coordinator on each node (placed when training starts, both nodes there).
  for (const char* node : {"node1", "node2"}) {
    std::ifstream f(run_dir + "/logs/" + node + ".log");
    const std::string log(std::istreambuf_iterator<char>(f), {});
    EXPECT_NE(log.find("hosting coord/"), std::string::npos) << node << ":\n" << log;
  }

  auto [export_code, export_out] = run_command(
      {ATOLL_BIN, "export", "--run-dir", run_dir, "--out", dir.sub("model.pt"), "--json"}, dir.sub("export.log"));
  ASSERT_EQ(export_code, 0) << export_out;
  const json manifest = json::parse(export_out.substr(export_out.find('{')));
  EXPECT_EQ(manifest["params"], 73729) << manifest.dump();
  ASSERT_EQ(manifest["fragments"].size(), 2u) << manifest.dump();
  for (const auto& unit : manifest["fragments"]) {
    EXPECT_EQ(unit["round"], 4) << manifest.dump();
    // Each slice says where it lies in its fragment: 3 granules, then the rest.
    EXPECT_EQ(unit["fragment"], 0) << manifest.dump();
    EXPECT_EQ(unit["slice"], unit["id"]) << manifest.dump();
    EXPECT_EQ(unit["first"], unit["id"] == 0 ? 0 : 3 * 16384) << manifest.dump();
    EXPECT_EQ(unit["params"], unit["id"] == 0 ? 3 * 16384 : 73729 - 3 * 16384) << manifest.dump();
    const std::pair<int, int> key{unit["id"].get<int>(), 4};
    EXPECT_EQ(unit["digest"], released.at(key)) << manifest.dump();
  }

  auto [unsharded_code, unsharded_out] = train(unsharded, "1");
  ASSERT_EQ(unsharded_code, 0) << unsharded_out;
  EXPECT_GT(final_loss(run_dir), 0.0);
  EXPECT_EQ(final_loss(run_dir), final_loss(unsharded)) << "a round reduced in slices is the round reduced whole";
}

// `atoll export --ledger`: beside the model, the units its rounds learned, from the run's
// data cursor in the head's store. The mlp task samples its own data (it leases nothing),
// so the test writes a cursor there after the run, as a head would have saved it: two
// commits, one after the exported round. A run without a cursor is refused and writes
// neither file.
TEST(Process, AnExportWritesTheDataLedgerOfTheRoundsItExports) {
  testing::temp_dir dir;
  const std::string run_dir = dir.sub("run");
  auto [code, out] =
      run_command({ATOLL_BIN, "local", "--example", "mlp", "--steps", "20", "--run-dir", run_dir, "--set",
                   "model.width=32", "--set", "diloco.sync_every=10", "--set", "diloco.fragments=1"},
                  dir.sub("run.log"), 120s);
  ASSERT_EQ(code, 0) << out;
  auto [no_cursor, no_cursor_out] = run_command(
      {ATOLL_BIN, "export", "--run-dir", run_dir, "--out", dir.sub("model.pt"), "--ledger", dir.sub("ledger.json")},
      dir.sub("export0.log"));
  EXPECT_EQ(no_cursor, 2) << no_cursor_out;
  EXPECT_NE(no_cursor_out.find("no data ledger"), std::string::npos) << no_cursor_out;
  EXPECT_FALSE(std::filesystem::exists(dir.sub("model.pt"))) << "a refused export writes nothing";

  {  // the cursor a head would have saved: chunk 0 learned in round 1, chunk 1 in round 99
    auto db = open_rocksdb_store(run_dir + "/head/db");
    ASSERT_TRUE(db) << db.err().describe();
    registry_store store(**db);
    auto snap = store.load();
    ASSERT_TRUE(snap && *snap);
    auto cursor = data::data_cursor::make({100, 10, 1, 0});
    ASSERT_TRUE(cursor);
    for (std::uint64_t round : {1u, 99u}) {
      const auto chunk = cursor->lease("worker/1.0");
      ASSERT_TRUE(chunk);
      ASSERT_FALSE(cursor->tie("worker/1.0", 0, round, *chunk, cursor->positions_of(*chunk)));
      cursor->committed(0, round, 0, {"worker/1.0"}, {});
    }
    auto parts = encode_cursor_parts(cursor->snapshot());
    (*snap)->data_cursor = std::move(parts.header);
    (*snap)->data_cursor_parts = std::move(parts.buckets);
    ASSERT_FALSE(store.save(**snap));
  }
  auto [export_code, export_out] = run_command({ATOLL_BIN, "export", "--run-dir", run_dir, "--out", dir.sub("model.pt"),
                                                "--ledger", dir.sub("ledger.json"), "--json"},
                                               dir.sub("export.log"));
  ASSERT_EQ(export_code, 0) << export_out;
  const json manifest = json::parse(export_out.substr(export_out.find('{')));
  EXPECT_EQ(manifest["ledger"], dir.sub("ledger.json"));
  ASSERT_EQ(manifest["fragments"].size(), 1u);
  const auto exported_round = manifest["fragments"][0]["round"].get<std::uint64_t>();
  ASSERT_GE(exported_round, 1u);
  std::ifstream in(dir.sub("ledger.json"));
  const json ledger = json::parse(in);
  EXPECT_EQ(ledger["exported_rounds"], json::array({exported_round}));
  ASSERT_EQ(ledger["epochs"].size(), 1u) << ledger.dump();
  const auto& consumed = ledger["epochs"][0]["consumed"];
  ASSERT_EQ(consumed.size(), 1u) << "round 99 is after the exported round: " << ledger.dump();
  EXPECT_EQ(consumed[0]["round"], 1);
  std::vector<std::uint64_t> want;
  for (std::uint64_t p = 0; p < 10; ++p) want.push_back(data::unit_at(1, 0, p, 100));  // run.seed = 1
  EXPECT_EQ(consumed[0]["units"], json(want));

  auto [again, again_out] = run_command(
      {ATOLL_BIN, "export", "--run-dir", run_dir, "--out", dir.sub("other.pt"), "--ledger", dir.sub("ledger.json")},
      dir.sub("export2.log"));
  EXPECT_EQ(again, 2) << "the ledger exists: --force overwrites it";
  EXPECT_NE(again_out.find("exists"), std::string::npos) << again_out;
}

// run.data_cursor end to end: three nodes train the GPT example on chunks leased from the
// head, with two fragments; one node is killed mid-run. The ledger the export writes must
// hold no unit twice for any fragment, every round of it must be a round the coordinators
// reported, and once the run is over no chunk may still be held by the killed worker.
TEST(Process, WithTheDataCursorAKilledNodesChunksSettleAndNoUnitIsLearnedTwice) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head({ATOLL_BIN,   "up",
                   "--listen",  "tcp://127.0.0.1:0",
                   "--run-dir", head_dir,
                   "--set",     "run.steps=60",
                   "--set",     "run.min_workers=2",
                   "--set",     "run.data_cursor=true",
                   "--set",     "inner.batch_size=8",
                   "--set",     "diloco.sync_every=10",
                   "--set",     "diloco.fragments=2",
                   "--set",     "run.eval_every=1000"},
                  dir.sub("head.log"));
  const std::string ep = wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node2.log"));
  subprocess node3({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node3.log"));
  bool leasing = false;  // every worker has trained on leased units
  for (int i = 0; i < 600 && !leasing; ++i) {
    std::this_thread::sleep_for(100ms);
    const json status = ctl(ep, "status", dir.sub("ctl.log"));
    leasing = status["workers"].size() == 3 && status["data"]["leasing"].get<bool>();
    for (const auto& w : status["workers"]) leasing = leasing && w["step"].get<int>() >= 15;
  }
  ASSERT_TRUE(leasing) << head.output();
  node3.signal(SIGKILL);
  EXPECT_EQ(node3.wait(10s), 128 + SIGKILL);
  EXPECT_EQ(node1.wait(150s), 0) << node1.output();
  EXPECT_EQ(node2.wait(150s), 0) << node2.output();

  const json data = ctl(ep, "data", dir.sub("ctl.log"));
  EXPECT_GT(data["consumed"].get<std::uint64_t>(), 0u) << data.dump();
  std::set<std::string> holders;
  for (const auto& c : data["chunks"]) holders.insert(c["holder"].get<std::string>());
  EXPECT_EQ(holders.count("worker/3.0"), 0u) << "the killed worker's chunks settled: " << data.dump();

  auto [code, out] = run_command(
      {ATOLL_BIN, "export", "--run-dir", head_dir, "--out", dir.sub("model.pt"), "--ledger", dir.sub("ledger.json")},
      dir.sub("export.log"));
  ASSERT_EQ(code, 0) << out;
  std::ifstream in(dir.sub("ledger.json"));
  const json ledger = json::parse(in);
  const auto run = read_metrics(head_dir);  // the coordinators' RoundReports, as the head wrote them
  // The default reduces each fragment's rounds in slices (diloco.shards = auto: 2 workers to
  // start, 2 slices): each slice is a sync unit with rounds of its own.
  const auto shards = ledger["shards"].get<std::uint32_t>();
  EXPECT_EQ(shards, 2u) << "the default, sharded rounds";
  EXPECT_EQ(ledger["fragments"], 2);
  std::map<std::uint32_t, std::set<std::uint64_t>> learned;  // per sync unit
  std::map<std::uint32_t, std::size_t> units_seen;
  for (const auto& e : ledger["epochs"])
    for (const auto& c : e["consumed"]) {
      const auto f = c["fragment"].get<std::uint32_t>() * shards + c.value("slice", 0u);
      EXPECT_TRUE(run.released.count({static_cast<int>(f), c["round"].get<int>()}))
          << "unit " << f << " round " << c["round"] << " is in the ledger but was never reported";
      for (const auto& u : c["units"]) {
        learned[f].insert(u.get<std::uint64_t>() + 1000000000ull * e["epoch"].get<std::uint64_t>());
        units_seen[f]++;
      }
    }
  ASSERT_EQ(learned.size(), 2u * shards) << "every slice of both fragments learned units: "
                                         << ledger.dump().substr(0, 2000);
  for (const auto& [f, units] : learned) {
    EXPECT_EQ(units.size(), units_seen[f]) << "unit " << f << ": a unit learned twice";
    EXPECT_GT(units.size(), 0u);
  }
}

TEST(Process, AtollDownMidRunStopsEveryNodeCleanly) {
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  subprocess head({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", head_dir, "--set", "run.example=mlp",
                   "--set", "run.steps=1000000", "--set", "run.min_workers=2", "--set", "model.width=32"},
                  dir.sub("head.log"));
  const std::string ep = wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node2.log"));
  // Wait until both workers are training, then stop the cluster.
  bool training = false;
  for (int i = 0; i < 200 && !training; ++i) {
    std::this_thread::sleep_for(50ms);
    const json status = ctl(ep, "status", dir.sub("ctl.log"));
    training = status["state"] == "training" && status["workers"].size() == 2 &&
               status["workers"][0]["step"].get<int>() > 0 && status["workers"][1]["step"].get<int>() > 0;
  }
  ASSERT_TRUE(training) << head.output();
  auto [code, out] = run_command({ATOLL_BIN, "down", "--head", ep}, dir.sub("down.log"));
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(node1.wait(20s), 0) << node1.output();
  EXPECT_EQ(node2.wait(20s), 0) << node2.output();
  EXPECT_EQ(head.wait(20s), 0) << head.output();
}

TEST(Process, LocalRunsTheMlpToCompletionAndWritesMetrics) {
  testing::temp_dir dir;
  auto [code, out] = run_command({ATOLL_BIN, "local", "--example", "mlp", "--steps", "30", "--set",
                                  "diloco.sync_every=10", "--set", "model.width=32", "--run-dir", dir.sub("run")},
                                 dir.sub("local.log"), 120s);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("run finished"), std::string::npos) << out;
  EXPECT_NE(out.find("3 rounds committed"), std::string::npos) << out;
  std::ifstream metrics(dir.sub("run") + "/metrics.jsonl");
  int rounds = 0, summaries = 0, steps = 0;
  for (std::string line; std::getline(metrics, line);) {
    auto j = json::parse(line, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << line;
    rounds += j["type"] == "round";
    summaries += j["type"] == "summary";
    steps += j["type"] == "step";
  }
  EXPECT_EQ(rounds, 3);
  EXPECT_EQ(summaries, 1);
  EXPECT_GT(steps, 0);
}

// A CPU worker alone in its process tries the thread layouts within its budget over its
// first 29 steps, keeps one, and says which in its log, its progress and the metrics.
TEST(Process, ALoneCpuWorkerTriesItsThreadLayoutsAndReportsTheOneItKeeps) {
  testing::temp_dir dir;
  auto [code, out] = run_command({ATOLL_BIN, "local", "--nodes", "1", "--example", "mlp", "--steps", "40", "--set",
                                  "run.min_workers=1", "--set", "run.threads_per_worker=2", "--set",
                                  "diloco.sync_every=20", "--set", "model.width=32", "--run-dir", dir.sub("run")},
                                 dir.sub("local.log"), 120s);
  ASSERT_EQ(code, 0) << out;
  std::string logs;
  for (const auto& entry : std::filesystem::directory_iterator(dir.sub("run") + "/logs")) {
    std::ifstream f(entry.path());
    logs += std::string(std::istreambuf_iterator<char>(f), {});
  }
  EXPECT_NE(logs.find("worker/1.0: threads (LibTorch x BLAS): trying 2x2, 1x2, 2x1, 1x1 over the first 29 steps"),
            std::string::npos)
      << logs;
  const auto kept = logs.find("worker/1.0: threads (LibTorch x BLAS) ");
  ASSERT_NE(kept, std::string::npos) << logs;
  const std::string layouts[] = {"2x2", "1x2", "2x1", "1x1"};
  const std::string chosen = logs.substr(kept + std::string("worker/1.0: threads (LibTorch x BLAS) ").size(), 3);
  EXPECT_NE(std::find(std::begin(layouts), std::end(layouts), chosen), std::end(layouts)) << logs;
  std::ifstream metrics(dir.sub("run") + "/metrics.jsonl");
  int trying = 0, settled = 0;
  for (std::string line; std::getline(metrics, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j["type"] != "step" || !j.contains("threads")) continue;
    const std::string threads = j["threads"];
    if (j["step"].get<int>() < 29) {
      EXPECT_EQ(threads.rfind("trying ", 0), 0u) << line;
      ++trying;
    } else {
      EXPECT_EQ(threads, chosen) << line;
      ++settled;
    }
  }
  EXPECT_GT(trying, 0);
  EXPECT_GT(settled, 0);
}

TEST(Process, ABadConfigValueIsRefusedByNameBeforeAnythingStarts) {
  testing::temp_dir dir;
  auto [code, out] = run_command(
      {ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", dir.sub("head"), "--set", "diloco.sync_every=-3"},
      dir.sub("up.log"));
  EXPECT_EQ(code, 2) << out;
  EXPECT_NE(out.find("diloco.sync_every"), std::string::npos) << out;
  auto [code1, out1] = run_command({ATOLL_BIN, "up", "--listen", "tcp://127.0.0.1:0", "--run-dir", dir.sub("head1"),
                                    "--set", "run.thread_layout=two"},
                                   dir.sub("up1.log"));
  EXPECT_EQ(code1, 2) << out1;
  EXPECT_NE(out1.find("run.thread_layout: thread layout \"two\""), std::string::npos) << out1;

  std::ofstream(dir.sub("bad.toml")) << "[inner]\nlearning_rate = 0.1\n";
  auto [code2, out2] = run_command({ATOLL_BIN, "local", "--config", dir.sub("bad.toml"), "--run-dir", dir.sub("run")},
                                   dir.sub("local.log"));
  EXPECT_EQ(code2, 2) << out2;
  EXPECT_NE(out2.find("inner.learning_rate"), std::string::npos) << out2;
}

// Command-line values, endpoints and keys: each refused before anything starts, by name.
TEST(Process, BadCommandLinesAreRefusedByName) {
  testing::temp_dir dir;
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"local", "--steps", "-5"}, "--steps"},
      {{"local", "--nodes", "0"}, "--nodes"},
      {{"join", "--head", "tcp://127.0.0.1:1", "--threads", "-1"}, "--threads"},
      {{"join", "--head", "10.0.0.1:7070"}, "endpoint '10.0.0.1:7070'"},
      {{"join", "--head", "tcp://10.0.0.1:7070"}, "--insecure"},  // off loopback without keys
      {{"up", "--run-dir", dir.sub("h1"), "--listen", "tcp://127.0.0.1:99999"}, "port '99999'"},
      {{"up", "--run-dir", dir.sub("h2"), "--listen", "tcp://0.0.0.0:0"}, "--keys DIR"},
      {{"up", "--run-dir", dir.sub("h3"), "--keys", dir.sub("no-keys")}, "head.key"},
      {{"join", "--head", "tcp://127.0.0.1:1", "--keys", dir.sub("keys"), "--insecure"}, "--insecure"},
      // Devices are checked before the node registers (no LibTorch has a cuda:900).
      {{"join", "--head", "tcp://127.0.0.1:1", "--devices", "cpu,gpu0"}, "unknown device 'gpu0'"},
      {{"join", "--head", "tcp://127.0.0.1:1", "--devices", "cuda:900"}, "device cuda:900"},
      {{"join", "--head", "tcp://127.0.0.1:1", "--devices", "cpu,,cpu"}, "empty entry"},
      {{"local", "--devices", "cuda:0", "--workers-per-node", "2"}, "not both"},
  };
  for (const auto& [args, needle] : cases) {
    std::vector<std::string> argv = {ATOLL_BIN};
    argv.insert(argv.end(), args.begin(), args.end());
    auto [code, out] = run_command(argv, dir.sub("cli.log"), 10s);
    EXPECT_NE(code, 0) << args[0] << " " << args[1] << ": " << out;
    EXPECT_NE(code, -1) << "still running: " << args[0] << " " << args[1];
    EXPECT_NE(out.find(needle), std::string::npos) << "expected '" << needle << "' in: " << out;
  }
  auto [ctl_code, ctl_out] =
      run_command({ATOLLCTL_BIN, "--timeout", "-5", "--head", "tcp://127.0.0.1:1", "status"}, dir.sub("ctl.log"));
  EXPECT_NE(ctl_code, 0);
  EXPECT_NE(ctl_out.find("--timeout"), std::string::npos) << ctl_out;
}

TEST(Process, AWorkerThatCannotStartIsRestartedABoundedNumberOfTimesThenTheRunFails) {
  testing::temp_dir dir;
  // A cause the start-up checks know (three fragments of the mlp's two layer groups) is
  // refused before any process starts...
  auto [refused, why] =
      run_command({ATOLL_BIN, "local", "--example", "mlp", "--fragments", "3", "--run-dir", dir.sub("refused")},
                  dir.sub("refused.log"), 60s);
  EXPECT_EQ(refused, 2) << why;
  EXPECT_NE(why.find("only 2 layer groups"), std::string::npos) << why;
  // ...one they cannot know fails the worker on every start, and its node gives up.
  subprocess local({ATOLL_BIN, "local", "--example", "mlp", "--steps", "20", "--set", "cluster.restart_limit=2",
                    "--set", "cluster.restart_backoff_ms=50", "--run-dir", dir.sub("run")},
                   dir.sub("local.log"), {{"ATOLL_FAIL_POINT", "worker.replica"}});
  const int code = local.wait(60s);
  const std::string out = local.output();
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("fail point worker.replica"), std::string::npos) << out;
  EXPECT_NE(out.find("restart 2 of 2"), std::string::npos) << out;
  EXPECT_EQ(out.find("restart 3 of"), std::string::npos) << out;
  EXPECT_NE(out.find("after 2 restarts within 60000 ms; giving up"), std::string::npos) << out;
}

TEST(Process, AtollctlWithoutAHeadSaysSoAndFailsFast) {
  testing::temp_dir dir;
  auto [code, out] =
      run_command({ATOLLCTL_BIN, "--head", "tcp://127.0.0.1:1", "--timeout", "300", "status"}, dir.sub("ctl.log"));
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("timeout"), std::string::npos) << out;
}

// A node started before its head (a batch job that runs first) says whom it waits for, and
// gives up after --wait-for-head with an error that names the address.
TEST(Process, AJoinWithoutAHeadSaysWhomItWaitsForAndGivesUpAfterItsTimeout) {
  testing::temp_dir dir;
  const auto started = std::chrono::steady_clock::now();
  auto [code, out] =
      run_command({ATOLL_BIN, "join", "--head", "tcp://127.0.0.1:1", "--wait-for-head", "3"}, dir.sub("join.log"), 60s);
  const auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("waiting for the head at tcp://127.0.0.1:1: no answer for"), std::string::npos) << out;
  EXPECT_NE(out.find("atoll join: timeout: no head answered at tcp://127.0.0.1:1 within 3 s (--wait-for-head)"),
            std::string::npos)
      << out;
  EXPECT_LT(took, 20s) << "it gave up on time";
}

}  // namespace
}  // namespace atl
