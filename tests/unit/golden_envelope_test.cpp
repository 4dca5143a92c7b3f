// The wire schema is append-only: envelopes encoded by this version (committed under
// tests/unit/golden/) must still decode, field for field, in every later one. Regenerate only
// when the protocol version is bumped on purpose:
//   ATOLL_WRITE_GOLDEN=1 ./build/tests/atoll_unit_tests --gtest_filter='GoldenEnvelopes.*'
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>

#include <gtest/gtest.h>

#include "runtime/transport/wire.hpp"

namespace atl::wire {
namespace {

// A frames file: per frame, its length (4 bytes, little-endian) then its bytes.
void write_frames(const std::string& path, const frames& fs) {
  std::ofstream out(path, std::ios::binary);
  for (const auto& f : fs) {
    const auto n = static_cast<std::uint32_t>(f.size());
    const char len[4] = {static_cast<char>(n & 0xff), static_cast<char>((n >> 8) & 0xff),
                         static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 24) & 0xff)};
    out.write(len, 4);
    out.write(reinterpret_cast<const char*>(f.data()), static_cast<std::streamsize>(f.size()));
  }
}

frames read_frames(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<std::uint8_t> all{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  frames out;
  for (std::size_t i = 0; i + 4 <= all.size();) {
    const std::uint32_t n =
        all[i] | (all[i + 1] << 8) | (all[i + 2] << 16) | (static_cast<std::uint32_t>(all[i + 3]) << 24);
    i += 4;
    if (i + n > all.size()) break;
    out.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i), all.begin() + static_cast<std::ptrdiff_t>(i + n));
    i += n;
  }
  return out;
}

struct golden {
  const char* name;
  std::function<void(outgoing&)> build;
  std::function<void(const message&)> check;
};

void header(outgoing& out, const char* sender, const char* receiver) {
  out.envelope.setClusterId("golden-cluster");
  out.envelope.setSender(sender);
  out.envelope.setReceiver(receiver);
  out.envelope.setEpoch(7);
  out.envelope.setSeq(42);
}

const std::vector<golden>& cases() {
  static const std::vector<golden> all = {
      {"hello",
       [](outgoing& out) {
         header(out, "node/pending-1-2", "registry");
         auto h = out.envelope.initHello();
         h.setNodeId(3);
         auto d = h.initDevices(2);
         d.set(0, "cpu");
         d.set(1, "cuda:0");
         h.setHostname("island");
         h.setPid(1234);
         h.setCanKeep(true);
       },
       [](const message& m) {
         const auto h = m.envelope().getHello();
         EXPECT_EQ(h.getNodeId(), 3u);
         ASSERT_EQ(h.getDevices().size(), 2u);
         EXPECT_STREQ(h.getDevices()[1].cStr(), "cuda:0");
         EXPECT_STREQ(h.getHostname().cStr(), "island");
         EXPECT_EQ(h.getPid(), 1234u);
         EXPECT_TRUE(h.getCanKeep());
       }},
      {"membership",
       [](outgoing& out) {
         header(out, "registry", "coord/1");
         auto m = out.envelope.initMembership();
         m.setEpoch(9);
         auto w = m.initWorkers(2);
         w.set(0, "worker/1.0");
         w.set(1, "worker/2.0");
         m.setQuorum(2);
         m.initKeepers(1).set(0, "keeper/0");
       },
       [](const message& m) {
         const auto ms = m.envelope().getMembership();
         EXPECT_EQ(ms.getEpoch(), 9u);
         ASSERT_EQ(ms.getWorkers().size(), 2u);
         EXPECT_STREQ(ms.getWorkers()[1].cStr(), "worker/2.0");
         EXPECT_EQ(ms.getQuorum(), 2u);
         EXPECT_STREQ(ms.getKeepers()[0].cStr(), "keeper/0");
       }},
      {"contribution",
       [](outgoing& out) {
         header(out, "worker/1.0", "coord/0");
         auto c = out.envelope.initContribution();
         c.setFragment(0);
         c.setRound(5);
         c.setWeight(1.0f);
         c.setStep(50);
         const float values[3] = {0.5f, -1.25f, 3.0f};
         out.tensors.push_back(tensor::from_floats(values, 3));
       },
       [](const message& m) {
         const auto c = m.envelope().getContribution();
         EXPECT_EQ(c.getRound(), 5u);
         EXPECT_EQ(c.getStep(), 50u);
         EXPECT_FLOAT_EQ(c.getWeight(), 1.0f);
         ASSERT_EQ(m.tensors().size(), 1u);
         EXPECT_EQ(m.tensors()[0].to_floats(), (std::vector<float>{0.5f, -1.25f, 3.0f}));
       }},
      {"round_result",
       [](outgoing& out) {
         header(out, "coord/0", "worker/1.0");
         auto r = out.envelope.initRoundResult();
         r.setFragment(0);
         r.setRound(5);
         r.setDigest(0x1234abcdULL);
         const float values[2] = {1.0f, 2.0f};
         out.tensors.push_back(tensor::from_floats(values, 2));
       },
       [](const message& m) {
         const auto r = m.envelope().getRoundResult();
         EXPECT_EQ(r.getRound(), 5u);
         EXPECT_EQ(r.getDigest(), 0x1234abcdULL);
         EXPECT_EQ(m.tensors()[0].to_floats(), (std::vector<float>{1.0f, 2.0f}));
       }},
      {"control_request",
       [](outgoing& out) {
         header(out, "ctl/1-2", "registry");
         auto c = out.envelope.initControlRequest();
         c.setCommand("leave");
         c.setArgument("2");
       },
       [](const message& m) {
         EXPECT_STREQ(m.envelope().getControlRequest().getCommand().cStr(), "leave");
         EXPECT_STREQ(m.envelope().getControlRequest().getArgument().cStr(), "2");
       }},
  };
  return all;
}

std::string golden_path(const char* name) { return std::string(ATOLL_GOLDEN_DIR) + "/" + name + ".frames"; }

TEST(GoldenEnvelopes, TodaysEncodingsStillDecodeFieldForField) {
  const bool write = std::getenv("ATOLL_WRITE_GOLDEN") != nullptr;
  for (const auto& g : cases()) {
    if (write) {
      outgoing out;
      g.build(out);
      write_frames(golden_path(g.name), encode(out));
    }
    auto fs = read_frames(golden_path(g.name));
    ASSERT_FALSE(fs.empty()) << g.name << ": no committed bytes at " << golden_path(g.name);
    auto msg = decode(std::move(fs), limits{});
    ASSERT_TRUE(msg) << g.name << ": " << msg.err().describe();
    EXPECT_EQ((*msg)->cluster_id(), "golden-cluster") << g.name;
    EXPECT_EQ((*msg)->epoch(), 7u) << g.name;
    EXPECT_EQ((*msg)->seq(), 42u) << g.name;
    g.check(**msg);
  }
}

}  // namespace
}  // namespace atl::wire
