// Protocol tier (tests/support/protocol_fixture.hpp): the keepers: a replica that catches up from
// its source, the round log followed and replayed, the commit fence, chunks served.
#include "tests/support/protocol_fixture.hpp"

namespace atl {
namespace {

using namespace protocol_testing;

// A replica keeper placed on a node catches up from the head's keeper: the latest round of
// every fragment, bit for bit. A LoadReply from anyone else is refused.
TEST_F(ProtocolTest, AReplicaKeeperCatchesUpFromItsSource) {
  fragment_checkpoint cp{0, 3, 2, {1.0f, -0.0f, 1e-40f}, {0.5f, 0.25f, 0.125f}};
  ASSERT_FALSE(checkpoints_.commit(cp));
  auto storage = std::make_shared<keeper_storage>();
  storage->db = make_memory_store();
  storage->checkpoints = std::make_unique<checkpoint_store>(*storage->db, 10);
  const auto* replica_store = storage->checkpoints.get();
  dir_.add("keeper/1",
           sys_.spawn(keeper_replica_actor, static_cast<transport*>(&net_), std::string("keeper/1"), cluster_.get(),
                      storage, std::string("keeper/0"), std::uint32_t{2}, std::vector<std::uint32_t>{}));
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
  dir_.add("keeper/1",
           sys_.spawn(keeper_replica_actor, static_cast<transport*>(&net_), std::string("keeper/1"), cluster_.get(),
                      storage, std::string("keeper/9"), std::uint32_t{2}, std::vector<std::uint32_t>{}));
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

}  // namespace
}  // namespace atl
