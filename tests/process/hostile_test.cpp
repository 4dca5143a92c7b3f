// Process tier, RELIABILITY.md S6 and S7: a CURVE cluster (head + two nodes) trains while
//  - clients with an unknown key or without security try to get in, and
//  - an authenticated but hostile client sends random bytes, truncated and bit-flipped
//    envelopes, oversized frames, deeply nested and pointer-amplified messages, wrong
//    versions and cluster ids, impersonations, and replays of old-epoch contributions.
// Every process stays up, the head's memory stays bounded, atollctl still answers, the
// refusal counters rise, and the run's digests still agree at the end.
#include <fstream>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "runtime/transport/control_client.hpp"
#include "runtime/transport/security.hpp"
#include "runtime/transport/wire.hpp"
#include "tests/support/cluster_helpers.hpp"
#include "tests/support/hostile_frames.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::subprocess;
using namespace std::chrono_literals;

// Envelope bytes as a peer could write them, version included (wire::encode would fix it).
std::vector<std::uint8_t> envelope_bytes(std::uint16_t version, const std::string& cluster, const std::string& sender,
                                         const std::string& receiver) {
  capnp::MallocMessageBuilder b;
  auto env = b.initRoot<schema::Envelope>();
  env.setVersion(version);
  env.setClusterId(cluster);
  env.setSender(sender);
  env.setReceiver(receiver);
  env.initHeartbeat().setNodeId(1);
  auto flat = capnp::messageToFlatArray(b);
  return {flat.asBytes().begin(), flat.asBytes().end()};
}

wire::frames old_contribution(const std::string& cluster, const std::string& sender, std::size_t count) {
  wire::outgoing out;
  out.envelope.setClusterId(cluster);
  out.envelope.setSender(sender);
  out.envelope.setReceiver("coord/0");
  out.envelope.setEpoch(0);  // long gone: every node's Welcome raised the epoch
  auto c = out.envelope.initContribution();
  c.setRound(1);
  c.setWeight(1.0f);
  c.setCount(count);
  std::vector<float> zeros(count, 0.0f);
  out.tensors.push_back(wire::tensor::from_floats(zeros.data(), zeros.size()));
  return wire::encode(out);
}

class hostile_client {
 public:
  hostile_client(const std::string& head, const link_security& keys) : sock_(ctx_, zmq::socket_type::dealer) {
    sock_.set(zmq::sockopt::linger, 0);
    apply_client_security(sock_, keys);
    sock_.connect(head);
  }
  void send(const wire::frames& frames) {
    for (std::size_t i = 0; i < frames.size(); ++i)
      sock_.send(zmq::const_buffer(frames[i].data(), frames[i].size()),
                 i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    ++sent_;
  }
  std::size_t sent() const { return sent_; }

 private:
  zmq::context_t ctx_;
  zmq::socket_t sock_;
  std::size_t sent_ = 0;
};

std::uint64_t count_of(const json& counts, const char* reason) { return counts.value(reason, std::uint64_t{0}); }

TEST(Hostile, ACurveClusterRefusesStrangersAndSurvivesAHostileMember) {
  testing::temp_dir dir;
  const std::string keys_dir = dir.sub("keys"), head_dir = dir.sub("head");
  auto [kg_code, kg_out] = testing::run_command({ATOLL_BIN, "keygen", "--out", keys_dir}, dir.sub("keygen.log"));
  ASSERT_EQ(kg_code, 0) << kg_out;
  auto keys = load_client_security(keys_dir);
  ASSERT_TRUE(keys) << keys.err().describe();

  subprocess head({ATOLL_BIN,   "up",
                   "--listen",  "tcp://127.0.0.1:0",
                   "--run-dir", head_dir,
                   "--keys",    keys_dir,
                   "--set",     "run.example=mlp",
                   "--set",     "run.steps=20000",
                   "--set",     "diloco.sync_every=500",
                   "--set",     "run.eval_every=10000",
                   "--set",     "model.width=32",
                   "--set",     "run.min_workers=2",
                   "--set",     "net.max_frame_mb=4"},
                  dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  subprocess node1({ATOLL_BIN, "join", "--head", ep, "--threads", "1", "--keys", keys_dir}, dir.sub("node1.log"));
  subprocess node2({ATOLL_BIN, "join", "--head", ep, "--threads", "1", "--keys", keys_dir}, dir.sub("node2.log"));

  // Wait for the first committed round: then the epoch is settled and the fragment's
  // size is known (the replayed contributions must have the right size to reach the
  // epoch fence).
  json status, checkpoints;
  for (int i = 0; i < 600; ++i) {
    auto reply = control_request(ep, "checkpoints", "", 2000ms, *keys);
    if (reply && reply->ok) checkpoints = json::parse(reply->json, nullptr, false);
    if (checkpoints.is_array() && !checkpoints.empty()) break;
    std::this_thread::sleep_for(100ms);
  }
  ASSERT_TRUE(checkpoints.is_array() && !checkpoints.empty()) << head.output();
  status = testing::ask(ep, "status", *keys);
  const std::string cluster = status["cluster_id"];
  const std::size_t params = checkpoints[0]["params"];
  const long rss_before = head.rss_kib();

  // Strangers: an unknown key, and no security at all.
  auto stranger = *keys;
  stranger.own = *generate_keypair();
  EXPECT_FALSE(control_request(ep, "status", "", 1000ms, stranger));
  EXPECT_FALSE(control_request(ep, "status", "", 1000ms, link_security{}));

  // The hostile member.
  hostile_client bad(ep, *keys);
  std::mt19937 rng(7);
  const auto valid = envelope_bytes(wire::protocol_version, cluster, "ctl/hostile", "registry");
  for (int i = 0; i < 300; ++i) {  // random bytes
    std::vector<std::uint8_t> junk(1 + rng() % 2048);
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    bad.send({junk});
  }
  for (int i = 0; i < 100; ++i)  // truncated
    bad.send({wire::bytes(valid.begin(), valid.begin() + static_cast<long>(rng() % valid.size()))});
  for (int i = 0; i < 300; ++i) {  // bit-flipped
    auto flipped = valid;
    for (int k = 0; k < 1 + static_cast<int>(rng() % 4); ++k) flipped[rng() % flipped.size()] ^= 1u << (rng() % 8);
    bad.send({wire::bytes(flipped)});
  }
  for (int i = 0; i < 4; ++i) bad.send({std::vector<std::uint8_t>(2u << 20, 0)});  // envelope over its 1 MiB cap
  for (int i = 0; i < 20; ++i) bad.send({testing::deeply_nested(100)});
  for (int i = 0; i < 20; ++i) bad.send({testing::pointer_amplified(2000, 2000)});
  for (int i = 0; i < 20; ++i) bad.send({testing::too_many_segments(100000)});
  for (int i = 0; i < 20; ++i) bad.send({envelope_bytes(99, cluster, "ctl/hostile", "registry")});
  for (int i = 0; i < 20; ++i)
    bad.send({envelope_bytes(wire::protocol_version, "not-this-cluster", "ctl/hostile", "registry")});
  for (int i = 0; i < 20; ++i) bad.send(old_contribution(cluster, "worker/1.0", params));  // another node's worker
  for (int i = 0; i < 20; ++i) bad.send(old_contribution(cluster, "worker/9.0", params));  // epoch 0 replays
  const std::size_t sent = bad.sent();
  {
    // A frame over net.max_frame_mb (4 MiB): ZeroMQ drops the connection before
    // allocating it. Its own client: the drop ends that connection.
    hostile_client huge(ep, *keys);
    for (int i = 0; i < 8; ++i) huge.send({std::vector<std::uint8_t>(64, 0), std::vector<std::uint8_t>(16u << 20, 1)});
    std::this_thread::sleep_for(1s);
  }

  // Nodes report their counters with each heartbeat (every second).
  std::this_thread::sleep_for(2500ms);
  status = testing::ask(ep, "status", *keys);
  ASSERT_TRUE(status.is_object()) << "atollctl status did not answer after the attack; head running: " << head.running()
                                  << "\n"
                                  << head.output();
  const auto& total = status["refused"]["total"];
  std::uint64_t refused = 0;
  for (const auto& [reason, n] : total.items()) refused += n.get<std::uint64_t>();
  std::cout << "[ hostile  ] sent " << sent << " hostile messages; refused: " << status["refused"].dump()
            << "; security " << status["security"].dump() << std::endl;
  EXPECT_GE(refused, sent * 9 / 10) << total.dump();
  EXPECT_GE(count_of(total, "malformed_frame"), 300u);
  EXPECT_GE(count_of(total, "frame_too_large"), 4u);
  EXPECT_GE(count_of(total, "version_mismatch"), 20u);
  EXPECT_GE(count_of(total, "cluster_mismatch"), 20u);
  EXPECT_EQ(count_of(total, "sender_conflict"), 20u);
  EXPECT_GE(count_of(total, "stale_epoch"), 20u);  // refused by the coordinator, on a node
  EXPECT_GE(status["security"]["auth_denied"].get<int>(), 1);
  EXPECT_GE(status["security"]["handshakes_failed"].get<int>(), 1);
  const long rss_after = head.rss_kib();
  EXPECT_LT(rss_after - rss_before, 64 * 1024) << "head RSS grew from " << rss_before << " to " << rss_after << " KiB";

  // The run finishes and still agrees.
  EXPECT_EQ(node1.wait(120s), 0) << node1.output();
  EXPECT_EQ(node2.wait(120s), 0) << node2.output();
  auto reply = control_request(ep, "fragments", "", 5000ms, *keys);
  ASSERT_TRUE(reply && reply->ok);
  const auto fragments = json::parse(reply->json);
  ASSERT_EQ(fragments.size(), 1u);
  EXPECT_EQ(fragments[0]["round"], 40);
  ASSERT_EQ(fragments[0]["workers"].size(), 2u);
  for (const auto& w : fragments[0]["workers"]) EXPECT_EQ(w["digest"], fragments[0]["keeper_digest"]) << w.dump();
  EXPECT_TRUE(head.running());
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms, *keys));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

}  // namespace
}  // namespace atl
