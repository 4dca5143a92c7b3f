#include <cstdlib>
#include <iostream>
#include <random>

#include <gtest/gtest.h>

#include <capnp/any.h>
#include <kj/exception.h>
#include "actors/decisions/round_explain.hpp"
#include "runtime/core/digest.hpp"

#include "runtime/transport/wire.hpp"
#include "tests/support/hostile_frames.hpp"

namespace atl {
namespace {

wire::frames make_contribution(std::uint64_t round, std::vector<float> values) {
  wire::outgoing out;
  out.envelope.setClusterId("c1");
  out.envelope.setSender("worker/1.0");
  out.envelope.setReceiver("coord/0");
  out.envelope.setEpoch(3);
  out.envelope.setSeq(9);
  auto c = out.envelope.initContribution();
  c.setFragment(0);
  c.setRound(round);
  c.setWeight(1.0f);
  out.tensors.push_back(wire::tensor::from_floats(values.data(), values.size()));
  return wire::encode(out);
}

TEST(Wire, AnEnvelopeWithATensorSurvivesTheRoundTrip) {
  auto decoded = wire::decode(make_contribution(4, {1.5f, -2.0f, 3.25f}), {});
  ASSERT_TRUE(decoded) << decoded.err().describe();
  const auto& msg = **decoded;
  EXPECT_EQ(msg.sender(), "worker/1.0");
  EXPECT_EQ(msg.receiver(), "coord/0");
  EXPECT_EQ(msg.cluster_id(), "c1");
  EXPECT_EQ(msg.epoch(), 3u);
  EXPECT_EQ(msg.seq(), 9u);
  ASSERT_TRUE(msg.envelope().isContribution());
  EXPECT_EQ(msg.envelope().getContribution().getRound(), 4u);
  ASSERT_EQ(msg.tensors().size(), 1u);
  EXPECT_EQ(msg.tensors()[0].to_floats(), (std::vector<float>{1.5f, -2.0f, 3.25f}));
}

TEST(Wire, TruncatedEnvelopeBytesAreRefusedAsMalformed) {
  auto frames = make_contribution(1, {1.0f});
  auto shorter = frames[0].to_vector();
  shorter.resize(shorter.size() - 16);
  frames[0] = std::move(shorter);
  auto decoded = wire::decode(std::move(frames), {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::malformed_frame);
}

TEST(Wire, GarbageBytesAreRefusedWithoutACrash) {
  std::mt19937 rng(7);
  int refused = 0;
  for (unsigned n = 0; n < 500; ++n) {
    std::vector<std::uint8_t> junk(8 * (1 + n % 40));
    for (auto& b : junk) b = static_cast<std::uint8_t>(rng());
    auto decoded = wire::decode(wire::frames{junk}, {});
    if (!decoded) {
      ++refused;
      EXPECT_TRUE(decoded.err().code == errc::malformed_frame || decoded.err().code == errc::version_mismatch ||
                  decoded.err().code == errc::too_many_frames || decoded.err().code == errc::tensor_mismatch)
          << decoded.err().describe();
    }
  }
  // A random buffer that is a valid version-1 envelope with matching frames is all but impossible.
  EXPECT_GE(refused, 495);
}

TEST(Wire, AnEnvelopeThatIsNotWholeWordsIsRefused) {
  auto decoded = wire::decode(wire::frames{std::vector<std::uint8_t>(13, 0)}, {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::malformed_frame);
}

TEST(Wire, AnOversizedEnvelopeIsRefused) {
  wire::limits lim;
  lim.max_envelope_bytes = 64;
  auto decoded = wire::decode(make_contribution(1, {1.0f}), lim);
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::frame_too_large);
}

TEST(Wire, AnotherProtocolVersionIsRefused) {
  wire::outgoing out;
  out.envelope.initHeartbeat().setNodeId(1);
  auto frames = wire::encode(out);
  // Re-encode with a different version by editing the builder after encode() set it.
  out.envelope.setVersion(wire::protocol_version + 1);
  auto flat = capnp::messageToFlatArray(out.builder());
  frames[0].assign(flat.asBytes().begin(), flat.asBytes().end());
  auto decoded = wire::decode(std::move(frames), {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::version_mismatch);
}

TEST(Wire, AFlippedTensorByteFailsTheChecksum) {
  auto frames = make_contribution(1, {1.0f, 2.0f});
  auto flipped = frames[1].to_vector();
  flipped[3] ^= 0x40;
  frames[1] = std::move(flipped);
  auto decoded = wire::decode(std::move(frames), {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::checksum_mismatch);
}

TEST(Wire, AMissingTensorFrameIsRefused) {
  auto frames = make_contribution(1, {1.0f, 2.0f});
  frames.pop_back();
  auto decoded = wire::decode(std::move(frames), {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::too_many_frames);
}

TEST(Wire, ATensorFrameOfTheWrongSizeIsRefused) {
  auto frames = make_contribution(1, {1.0f, 2.0f});
  auto longer = frames[1].to_vector();
  longer.push_back(0);
  frames[1] = std::move(longer);
  auto decoded = wire::decode(std::move(frames), {});
  ASSERT_FALSE(decoded);
  EXPECT_EQ(decoded.err().code, errc::tensor_mismatch);
}

TEST(Wire, DeepNestingIsRefusedByTheReaderLimits) {
  auto r = wire::decode({testing::deeply_nested(64)}, wire::limits{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::malformed_frame);
  EXPECT_NE(r.err().message.find("nest"), std::string::npos) << r.err().message;
  // The same shape within the limit is refused for what it is not: its first pointer is a
  // struct where the envelope has text.
  auto shallow = wire::decode({testing::deeply_nested(4)}, wire::limits{});
  ASSERT_FALSE(shallow);
  EXPECT_EQ(shallow.err().message.find("nest"), std::string::npos) << shallow.err().message;
}

TEST(Wire, PointerAmplificationIsRefusedByTheTraversalLimit) {
  // 512 pointers to one 1000-word struct: 8 KiB on the wire, 512000 words to traverse.
  auto bytes = testing::pointer_amplified(512, 1000);
  EXPECT_LT(bytes.size(), 16u * 1024);
  auto r = wire::decode({bytes}, wire::limits{});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.err().code, errc::malformed_frame);
  EXPECT_NE(r.err().message.find("traversal"), std::string::npos) << r.err().message;
}

TEST(Wire, ASegmentTableLargerThanTheFrameIsRefused) {
  for (std::uint32_t segments : {2u, 600u, 0x7fffffffu}) {
    auto r = wire::decode({testing::too_many_segments(segments)}, wire::limits{});
    ASSERT_FALSE(r) << segments;
    EXPECT_EQ(r.err().code, errc::malformed_frame);
  }
}

// Found by the hostile-client test: a bit flip that turns the pointer of a List(UInt64)
// into a list of bytes passes the pointer walk, and reading the list then threw inside
// the registry actor. decode() now reads every typed field, so any flip is refused or
// yields a message whose fields all read cleanly.
TEST(Wire, EverySingleBitFlipIsRefusedOrReadsCleanly) {
  wire::outgoing out;
  out.envelope.setClusterId("c1");
  out.envelope.setSender("node/1");
  out.envelope.setReceiver("registry");
  auto hb = out.envelope.initHeartbeat();
  hb.setNodeId(1);
  auto refused = hb.initRefused(4);
  for (unsigned i = 0; i < 4; ++i) refused.set(i, i * 1000);
  const auto valid = wire::encode(out)[0];
  int accepted = 0;
  for (std::size_t bit = 0; bit < valid.size() * 8; ++bit) {
    auto flipped = valid.to_vector();
    flipped[bit / 8] ^= static_cast<std::uint8_t>(1u << (bit % 8));
    auto msg = wire::decode({flipped}, wire::limits{});
    if (!msg) continue;
    ++accepted;
    const auto env = (*msg)->envelope();
    EXPECT_NO_THROW({
      if (env.isHeartbeat())
        for (auto v : env.getHeartbeat().getRefused()) (void)v;
    }) << "bit "
       << bit;
  }
  EXPECT_GT(accepted, 0);  // flips in text and numbers still decode: the actors judge those
}

// Found by fuzz_envelope: zero-sized list elements cost no bytes, so a 200-byte frame
// could declare 100k tensor descriptors and make decode walk them all (67 ms each).
TEST(Wire, AHugeListOfEmptyStructsIsRefusedBeforeItIsWalked) {
  for (unsigned pointer : {3u, 10u}) {  // 3: envelope.tensors; 10: stands for welcome.workers
    capnp::MallocMessageBuilder b;
    auto env = b.initRoot<schema::Envelope>();
    env.setVersion(wire::protocol_version);
    if (pointer == 10u) env.initWelcome().initWorkers(0);
    if (pointer == 3u)
      capnp::AnyStruct::Builder(kj::mv(env)).getPointerSection()[3].initAsListOfAnyStruct(0, 0, 100000);
    else capnp::AnyStruct::Builder(env.getWelcome()).getPointerSection()[0].initAsListOfAnyStruct(0, 0, 100000);
    auto flat = capnp::messageToFlatArray(b);
    wire::bytes bytes(flat.asBytes().begin(), flat.asBytes().end());
    EXPECT_LT(bytes.size(), 256u);
    auto r = wire::decode({bytes}, wire::limits{});
    ASSERT_FALSE(r) << pointer;
    EXPECT_TRUE(r.err().code == errc::too_many_frames || r.err().message.find("max_list_elements") != std::string::npos)
        << r.err().describe();
  }
}

// Validation walks a message twice with limits::traversal_limit_words, and each call of a
// list's getter spends the list's words again. The handler reads on a reader of its own:
// before, a valid envelope whose walks left little budget threw in its handler, outside
// decode's try (the head died at a thousand nodes, issue 67).
TEST(Wire, AHandlerCanReadAValidEnvelopeAsOftenAsItNeeds) {
  wire::outgoing out;
  auto progress = out.envelope.initRoundProgress();
  constexpr unsigned workers = 1000;
  auto participants = progress.initParticipants(workers);
  for (unsigned i = 0; i < workers; ++i) participants.set(i, "worker/" + std::to_string(i) + ".0");
  auto frames = wire::encode(out);
  const std::uint64_t words = frames[0].size() / sizeof(capnp::word);
  wire::limits lim;
  lim.traversal_limit_words = 2 * words + 64;  // the two validation walks, and nothing to spare
  auto decoded = wire::decode(std::move(frames), lim);
  ASSERT_TRUE(decoded) << decoded.err().describe();
  std::size_t read = 0;
  EXPECT_NO_THROW({
    for (int pass = 0; pass < 10; ++pass)
      for (auto name : (*decoded)->envelope().getRoundProgress().getParticipants()) read += name.size() > 0;
  });
  EXPECT_EQ(read, 10u * workers);
}

// The handler's own budget is bounded too: a handler that reads without end throws (into its
// actor's guard, actors/shared/guarded_handler.hpp) rather than spinning.
TEST(Wire, AHandlersReadsAreBoundedByItsOwnBudget) {
  wire::outgoing out;
  auto participants = out.envelope.initRoundProgress().initParticipants(100);
  for (unsigned i = 0; i < 100; ++i) participants.set(i, "worker/" + std::to_string(i) + ".0");
  wire::limits lim;
  lim.handler_traversal_limit_words = 10000;
  auto decoded = wire::decode(wire::encode(out), lim);
  ASSERT_TRUE(decoded) << decoded.err().describe();
  EXPECT_THROW(
      {
        for (int pass = 0; pass < 1000; ++pass) (void)(*decoded)->envelope().getRoundProgress().getParticipants();
      },
      kj::Exception);
}

// The control messages whose size grows with the cluster, written whole at five thousand
// workers (one a node) with ids, endpoints and keys as long as real ones: each decodes, under
// the envelope cap (until 2026-12-07 each was refused past 4096 list elements). At ten
// thousand (ATOLL_MESSAGE_NODES=10000 prints them) the whole PeerTable and RoundReport pass
// the cap: docs/design.md ("Message sizes") has each kind's size at 1000 and 10,000.
TEST(Wire, TheMessagesThatGrowWithTheClusterDecodeWholeAtFiveThousandNodes) {
  const char* nodes = std::getenv("ATOLL_MESSAGE_NODES");
  const unsigned n = nodes ? static_cast<unsigned>(std::strtoul(nodes, nullptr, 10)) : 5000;
  const auto worker = [](unsigned i) { return "worker/" + std::to_string(i + 1) + ".0"; };
  std::vector<std::pair<std::string, wire::frames>> messages;
  {
    wire::outgoing out;
    auto m = out.envelope.initMembership();
    auto workers = m.initWorkers(n);
    for (unsigned i = 0; i < n; ++i) workers.set(i, worker(i));
    messages.emplace_back("membership", wire::encode(out));
  }
  {
    wire::outgoing out;
    auto nodes = out.envelope.initPeerTable().initNodes(n);
    for (unsigned i = 0; i < n; ++i) {
      nodes[i].setNodeId(i + 1);
      nodes[i].setEndpoint("tcp://10.0." + std::to_string(i / 256) + "." + std::to_string(i % 256) + ":45017");
      nodes[i].setPublicKey(std::string(40, 'k'));  // a Z85 CURVE key
    }
    messages.emplace_back("peer_table", wire::encode(out));
  }
  {
    wire::outgoing out;
    auto r = out.envelope.initRoundReport();
    auto participants = r.initParticipants(n);
    auto weights = r.initWeights(n);
    auto ties = r.initTies(n);
    for (unsigned i = 0; i < n; ++i) {
      participants.set(i, worker(i));
      weights.set(i, 1.0f);
      ties[i].setWorker(worker(i));
      ties[i].initPieces(1)[0].setEnd(64);
    }
    messages.emplace_back("round_report", wire::encode(out));
  }
  {  // as a coordinator sends it: the round counted, at most progress_names named in each list
    wire::outgoing out;
    auto p = out.envelope.initRoundProgress();
    const auto named = static_cast<unsigned>(std::min<std::size_t>(n, progress_names));
    auto participants = p.initParticipants(named);
    auto contributors = p.initContributors(named);
    for (unsigned i = 0; i < named; ++i) participants.set(i, worker(i)), contributors.set(i, worker(n - 1 - i));
    p.setParticipantCount(n);
    p.setContributorCount(n / 2);
    messages.emplace_back("round_progress", wire::encode(out));
  }
  {
    wire::outgoing out;
    auto inputs = out.envelope.initCommitRequest().initInputs(n);
    for (unsigned i = 0; i < n; ++i) inputs[i].setWorker(worker(i));
    messages.emplace_back("commit_request", wire::encode(out));
  }
  for (auto& [kind, frames] : messages) {
    const auto size = frames[0].size();
    if (nodes) {  // a size report, not a check
      std::cout << kind << " at " << n << " nodes: " << size << " bytes\n";
      continue;
    }
    EXPECT_LT(size, wire::limits{}.max_envelope_bytes) << kind;
    auto decoded = wire::decode(std::move(frames), wire::limits{});
    EXPECT_TRUE(decoded) << kind << ": " << (decoded ? "" : decoded.err().describe());
    std::cout << kind << " at " << n << " nodes: " << size << " bytes\n";
  }
}

TEST(Wire, ClusterFencingAdmitsBootstrapMessagesOnly) {
  auto contribution = wire::decode(make_contribution(1, {1.0f}), {});
  ASSERT_TRUE(contribution);
  EXPECT_FALSE(wire::check_cluster(**contribution, "c1"));
  EXPECT_EQ(wire::check_cluster(**contribution, "other").code, errc::cluster_mismatch);
  EXPECT_EQ(wire::check_cluster(**contribution, "").code, errc::cluster_mismatch);

  wire::outgoing hello;
  hello.envelope.initHello().setNodeId(0);
  auto h = wire::decode(wire::encode(hello), {});
  ASSERT_TRUE(h);
  EXPECT_FALSE(wire::check_cluster(**h, "c1"));  // a new node does not know the id yet
}

TEST(ByteBuffer, CopiesShareTheBytesAndABorrowedBufferKeepsItsOwnerAlive) {
  const wire::bytes a(std::vector<std::uint8_t>{1, 2, 3});
  const wire::bytes copy = a;
  EXPECT_EQ(copy.data(), a.data());  // shared, not copied
  EXPECT_EQ(copy, a);
  EXPECT_EQ(copy.to_vector(), (std::vector<std::uint8_t>{1, 2, 3}));

  auto owner = std::make_shared<std::vector<std::uint8_t>>(std::vector<std::uint8_t>{9, 8, 7, 6});
  std::weak_ptr<std::vector<std::uint8_t>> watch = owner;
  auto borrowed = wire::bytes::borrowed(owner->data() + 1, 2, owner);
  owner.reset();
  EXPECT_FALSE(watch.expired());  // the buffer holds it
  EXPECT_EQ(borrowed.to_vector(), (std::vector<std::uint8_t>{8, 7}));
  borrowed = wire::bytes();
  EXPECT_TRUE(watch.expired());
  EXPECT_TRUE(borrowed.empty());
  EXPECT_NE(wire::bytes(std::vector<std::uint8_t>{1, 2}), a);
}

TEST(Digest, KnownValuesArePinned) {
  // If these change, digests shown by atollctl and stored in checkpoints change meaning.
  const std::vector<float> v = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f, 7.0f, 8.0f, 9.0f};
  const auto d = digest64(v.data(), v.size() * sizeof(float));
  EXPECT_EQ(digest_hex(d), "45e7ec71f3742caa");
  EXPECT_EQ(digest_hex(digest64("atoll", 5)), "84218161829b0040");
}

TEST(Digest, AnyBitFlipChangesTheDigest) {
  std::vector<std::uint8_t> bytes(1000);
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 37);
  const auto base = digest64(bytes.data(), bytes.size());
  for (std::size_t i = 0; i < bytes.size(); i += 97) {
    bytes[i] ^= 1;
    EXPECT_NE(digest64(bytes.data(), bytes.size()), base) << "byte " << i;
    bytes[i] ^= 1;
  }
  EXPECT_EQ(digest64(bytes.data(), bytes.size()), base);
}

TEST(Digest, AStreamInPiecesDigestsLikeTheWholeBytes) {
  std::mt19937 rng(3);
  std::vector<std::uint8_t> bytes(1000);
  for (auto& b : bytes) b = static_cast<std::uint8_t>(rng());
  for (std::size_t size : {0u, 1u, 7u, 8u, 31u, 32u, 33u, 100u, 1000u}) {
    const auto whole = digest64(bytes.data(), size);
    for (int trial = 0; trial < 20; ++trial) {
      digest_stream s;
      std::size_t at = 0;
      while (at < size) {
        const std::size_t piece = std::min<std::size_t>(size - at, rng() % 40);  // pieces of 0 bytes too
        s.update(bytes.data() + at, piece);
        at += piece;
      }
      EXPECT_EQ(s.finish(), whole) << size << " bytes, trial " << trial;
    }
  }
  digest_stream empty;
  empty.update(nullptr, 0);  // an empty frame's bytes
  EXPECT_EQ(empty.finish(), digest64(nullptr, 0));
  digest_stream pinned;
  pinned.update("at", 2);
  pinned.update("oll", 3);
  EXPECT_EQ(digest_hex(pinned.finish()), "84218161829b0040");
}

}  // namespace
}  // namespace atl
