// Process tier, RELIABILITY.md fault "disk full during a commit": the head's run dir is a
// small tmpfs that a test fills mid-run. Rounds are not acknowledged while it is full,
// the latest committed round stays readable, `atollctl status` names the problem, and
// once space returns the keeper commits again by itself and the run finishes in
// agreement. Needs root for mount (CI runs as root); skipped otherwise.
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "storage/checkpoint_store.hpp"
#include "tests/support/cluster_helpers.hpp"
#include "tests/support/full_disk.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::ask;
using testing::subprocess;
using namespace std::chrono_literals;

using testing::fill;
using testing::tmpfs_mount;

std::int64_t latest_round(const std::string& head) {
  const json cps = ask(head, "checkpoints");
  std::int64_t latest = -1;
  if (cps.is_array())
    for (const auto& c : cps) latest = std::max<std::int64_t>(latest, c["round"].get<std::int64_t>());
  return latest;
}

TEST(DiskFull, ACommitOnAFullDiskIsNotAcknowledgedAndTheKeeperRecoversBySelf) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root (CI runs as root)";
  testing::temp_dir dir;
  const std::string head_dir = dir.sub("head");
  std::filesystem::create_directories(head_dir);
  tmpfs_mount tmpfs(head_dir, "16m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here";

  subprocess head({ATOLL_BIN,   "up",
                   "--listen",  "tcp://127.0.0.1:0",
                   "--run-dir", head_dir,
                   "--metrics", dir.sub("metrics.jsonl"),
                   "--set",     "run.example=mlp",
                   "--set",     "run.steps=12000",
                   "--set",     "diloco.sync_every=400",
                   "--set",     "run.eval_every=6000",
                   "--set",     "model.width=32",
                   "--set",     "run.min_workers=2"},
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1"}, dir.sub("node2.log"));
  ASSERT_TRUE(testing::eventually([&] { return latest_round(ep) >= 2; }, 60s, 100ms)) << head.output();

  // Fill the disk: the next commit fails, and nothing after it is acknowledged.
  const std::size_t filled = fill(head_dir + "/filler");
  ASSERT_GT(filled, 0u);
  const auto storage_ok = [&] {
    const json st = ask(ep, "status");
    return !st.is_object() || st["storage"].value("ok", true);
  };
  ASSERT_TRUE(testing::eventually([&] { return !storage_ok(); }, 30s, 100ms)) << head.output();
  const std::int64_t stuck = latest_round(ep);
  std::this_thread::sleep_for(3s);
  const json during = ask(ep, "status");
  ASSERT_TRUE(during.is_object()) << "status did not answer with a full disk";
  EXPECT_FALSE(during["storage"]["ok"].get<bool>());
  EXPECT_NE(during["storage"]["last_error"].get<std::string>().find("disk is full"), std::string::npos)
      << during["storage"].dump();
  EXPECT_EQ(latest_round(ep), stuck) << "a round was acknowledged while the disk was full";
  EXPECT_EQ(during["fragments"][0]["round"].get<std::int64_t>(), stuck);  // no result released either
  EXPECT_TRUE(node1.running() && node2.running());

  // Space returns: the keeper commits again without help and the run finishes.
  std::remove((head_dir + "/filler").c_str());
  EXPECT_EQ(node1.wait(120s), 0) << node1.output();
  EXPECT_EQ(node2.wait(120s), 0) << node2.output();
  const json after = ask(ep, "status");
  EXPECT_TRUE(after["storage"]["ok"].get<bool>()) << after["storage"].dump();
  EXPECT_GE(after["storage"]["failed_commits"].get<int>(), 1);
  const json fragments = ask(ep, "fragments");
  ASSERT_EQ(fragments.size(), 1u);
  EXPECT_EQ(fragments[0]["round"], 30);
  ASSERT_EQ(fragments[0]["workers"].size(), 2u) << fragments.dump();
  for (const auto& w : fragments[0]["workers"]) EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
  EXPECT_EQ(latest_round(ep), 30);

  EXPECT_TRUE(control_request(ep, "down", "", 5000ms));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
  // Every stored round reads back with a valid digest after the head is gone.
  auto db = open_rocksdb_store(head_dir + "/db");
  ASSERT_TRUE(db) << db.err().describe();
  checkpoint_store store(**db, 5);
  auto latest = store.latest(0);
  ASSERT_TRUE(latest && latest->has_value());
  EXPECT_EQ((*latest)->round, 30u);
}

}  // namespace
}  // namespace atl
