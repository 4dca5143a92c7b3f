// The etcd client's pure parts: base64 as etcd's gateway writes it, what a campaign's
// claim means for a candidate, the --registry URL, and when a leader must stop. The client against a real etcd is tests/process/etcd_process_test.cpp.
#include <gtest/gtest.h>

#include "head/head_election.hpp"
#include "runtime/etcd/etcd_client.hpp"

namespace atl {
namespace {

TEST(EtcdClient, Base64RoundTripsAnyBytesAndRefusesWhatIsNotBase64) {
  const std::pair<std::string, std::string> table[] = {
      {"", ""},
      {"f", "Zg=="},
      {"fo", "Zm8="},
      {"foo", "Zm9v"},
      {"/atoll/leader", "L2F0b2xsL2xlYWRlcg=="},
      {std::string("\0\xff\x10", 3), "AP8Q"},
  };
  for (const auto& [bytes, text] : table) {
    EXPECT_EQ(base64_encode(bytes), text);
    auto back = base64_decode(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(*back, bytes);
  }
  for (const char* bad : {"Zg=", "Z===", "Zm9v!A==", "=Zm9", "Zg==Zg=="}) {
    auto decoded = base64_decode(bad);
    ASSERT_FALSE(decoded) << bad;
    EXPECT_EQ(decoded.err().code, errc::malformed_frame) << bad;
  }
}

TEST(HeadElection, AClaimLeadsWhenItCreatedTheKeyOrTheKeyIsBoundToItsLease) {
  struct row {
    const char* name;
    etcd_claim claim;
    std::int64_t my_lease;
    bool leading;
  };
  const row rows[] = {
      {"created the key", {true, {"tcp://a:7070", 12, 12, 5}}, 5, true},
      {"another holds it", {false, {"tcp://a:7070", 12, 12, 5}}, 7, false},
      {"it already held it (a campaign again)", {false, {"tcp://b:7070", 30, 30, 9}}, 9, true},
      {"its name, a dead lease (a restarted head)", {false, {"tcp://b:7070", 30, 30, 9}}, 11, false},
      {"no lease of its own", {false, {"tcp://b:7070", 30, 30, 0}}, 0, false},
  };
  for (const auto& r : rows) {
    const auto out = outcome_of(r.claim, r.my_lease);
    EXPECT_EQ(out.leading, r.leading) << r.name;
    EXPECT_EQ(out.leader, r.claim.holder.value) << r.name;
    EXPECT_EQ(out.term, r.claim.holder.create_revision) << r.name;
  }
}

TEST(EtcdClient, WithoutAnyMemberItSaysSoTyped) {
  etcd_client none("http://127.0.0.1:1,http://127.0.0.1:2", std::chrono::milliseconds(300));
  EXPECT_EQ(none.endpoints().size(), 2u);
  auto got = none.get("k");
  ASSERT_FALSE(got);
  EXPECT_EQ(got.err().code, errc::timeout);
  EXPECT_NE(got.err().message.find("127.0.0.1:2"), std::string::npos) << got.err().message;
  etcd_client empty("");
  EXPECT_EQ(empty.put("k", "v").code, errc::invalid_config);
}

TEST(HeadElection, ARegistryUrlNamesTheMembersAndTheRun) {
  struct row {
    std::string url;
    std::string endpoints;  // empty: refused
    std::string root;
  };
  const row table[] = {
      {"etcd://127.0.0.1:2379", "http://127.0.0.1:2379", "/atoll/default"},
      {"etcd://a:2379,b:22379/run-7.x_y", "http://a:2379,http://b:22379", "/atoll/run-7.x_y"},
      {"etcd://a:2379,,b:1/", "http://a:2379,http://b:1", "/atoll/default"},
      {"http://a:2379", "", ""},
      {"etcd://", "", ""},
      {"etcd://a", "", ""},
      {"etcd://:2379", "", ""},
      {"etcd://a:0", "", ""},
      {"etcd://a:65536", "", ""},
      {"etcd://a:23x9", "", ""},
      {"etcd://a:2379/bad/name", "", ""},
      {"etcd://a:2379/sp ace", "", ""},
  };
  for (const auto& r : table) {
    auto parsed = parse_etcd_registry(r.url);
    if (r.endpoints.empty()) {
      ASSERT_FALSE(parsed) << r.url;
      EXPECT_EQ(parsed.err().code, errc::invalid_config);
      EXPECT_NE(parsed.err().message.find(r.url), std::string::npos) << parsed.err().message;
      continue;
    }
    ASSERT_TRUE(parsed) << r.url << ": " << parsed.err().describe();
    EXPECT_EQ(parsed->endpoints, r.endpoints) << r.url;
    EXPECT_EQ(parsed->root, r.root) << r.url;
    EXPECT_EQ(parsed->election_key(), r.root + "/leader");
  }
}

TEST(HeadElection, ALeaderStopsBeforeEtcdCouldHaveLetItsLeaseGo) {
  using namespace std::chrono_literals;
  const auto sent = std::chrono::steady_clock::time_point(100s);
  const auto ttl = 3s;
  EXPECT_EQ(lead_margin(ttl), 500ms);
  EXPECT_FALSE(lead_lost(sent, sent, ttl));
  EXPECT_FALSE(lead_lost(sent, sent + 2499ms, ttl));
  EXPECT_TRUE(lead_lost(sent, sent + 2500ms, ttl)) << "ttl less the margin after the last renewal sent";
  EXPECT_TRUE(lead_lost(sent, sent + 10s, ttl));
}

}  // namespace
}  // namespace atl
