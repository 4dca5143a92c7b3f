// runtime/core/actor_id: every kind formats and parses back; malformed ids are typed errors.
#include <gtest/gtest.h>

#include "runtime/core/actor_id.hpp"

namespace atl {
namespace {

struct valid_row {
  std::string text;
  actor_kind kind;
  std::uint32_t number, index;
  std::string token;
};

TEST(ActorId, EveryKindParsesAndFormatsBack) {
  const std::vector<valid_row> rows = {
      {"registry", actor_kind::registry, 0, 0, ""},
      {"coord/0", actor_kind::coordinator, 0, 0, ""},
      {"coord/17", actor_kind::coordinator, 17, 0, ""},
      {"node/1", actor_kind::node, 1, 0, ""},
      {"node/4294967295", actor_kind::node, 4294967295u, 0, ""},
      {"node/pending-123-456", actor_kind::pending_node, 0, 0, "123-456"},
      {"worker/3.0", actor_kind::worker, 3, 0, ""},
      {"worker/12.7", actor_kind::worker, 12, 7, ""},
      {"keeper/0", actor_kind::keeper, 0, 0, ""},
      {"keeper/1", actor_kind::keeper, 1, 0, ""},
      {"ctl/991-42", actor_kind::control, 0, 0, "991-42"},
  };
  for (const auto& row : rows) {
    const auto id = parse_actor_id(row.text);
    ASSERT_TRUE(id) << row.text << ": " << id.err().describe();
    EXPECT_EQ(id->kind, row.kind) << row.text;
    EXPECT_EQ(id->number, row.number) << row.text;
    EXPECT_EQ(id->index, row.index) << row.text;
    EXPECT_EQ(id->token, row.token) << row.text;
    EXPECT_EQ(id->str(), row.text);
  }
}

TEST(ActorId, FormattersWriteTheGrammar) {
  EXPECT_EQ(registry_id(), "registry");
  EXPECT_EQ(coordinator_id(2), "coord/2");
  EXPECT_EQ(node_actor_id(5), "node/5");
  EXPECT_EQ(worker_id(5, 1), "worker/5.1");
  EXPECT_EQ(keeper_id(1), "keeper/1");
  EXPECT_EQ(pending_node_id("9-8"), "node/pending-9-8");
  EXPECT_EQ(control_id("x"), "ctl/x");
}

TEST(ActorId, MalformedIdsAreTypedErrors) {
  const std::vector<std::string> rows = {
      "",
      "registry/",
      "coord",
      "coord/",
      "coord/-1",
      "coord/01",
      "coord/1x",
      "coord/4294967296",
      "node/",
      "node/ 1",
      "node/pending-",
      "node/pending-a b",
      "worker/1",
      "worker/1.",
      "worker/.1",
      "worker/1.2.3",
      "worker/a.b",
      "keeper/",
      "ctl/",
      "ctl/a/b",
      "Coord/1",
      "bogus/1",
      std::string("coord/1\0", 8),
      "node/pending-" + std::string(49, 'a'),
  };
  for (const auto& text : rows) {
    const auto id = parse_actor_id(text);
    ASSERT_FALSE(id) << "accepted '" << text << "'";
    EXPECT_EQ(id.err().code, errc::malformed_id) << text;
  }
}

TEST(ActorId, QuestionsAboutUntrustedIdsAnswerOnlyForTheirKind) {
  EXPECT_EQ(fragment_of_coordinator("coord/3"), 3u);
  EXPECT_EQ(fragment_of_coordinator("keeper/3"), std::nullopt);
  EXPECT_EQ(fragment_of_coordinator("coord/x"), std::nullopt);
  EXPECT_EQ(node_of("node/4"), 4u);
  EXPECT_EQ(node_of("worker/4.0"), std::nullopt);
  EXPECT_EQ(host_node_of("worker/4.2"), 4u);
  EXPECT_EQ(host_node_of("node/4"), 4u);
  EXPECT_EQ(host_node_of("coord/4"), std::nullopt);
  EXPECT_TRUE(is_kind("ctl/1-2", actor_kind::control));
  EXPECT_FALSE(is_kind("ctl/", actor_kind::control));
}

}  // namespace
}  // namespace atl
