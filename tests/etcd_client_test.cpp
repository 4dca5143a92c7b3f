// The etcd client's pure parts: base64 as etcd's gateway writes it, and what a campaign's
// claim means for a candidate. The client against a real etcd is tests/etcd_process_test.cpp.
#include <gtest/gtest.h>

#include "runtime/etcd_client.hpp"
#include "runtime/head_election.hpp"

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

}  // namespace
}  // namespace atl
