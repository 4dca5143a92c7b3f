// Who may use the head's HTTP endpoint, and the Prometheus text it serves.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "actors/registry/prometheus_text.hpp"
#include "head/http_access.hpp"
#include "tests/support/test_dir.hpp"

namespace atl {
namespace {

TEST(HttpAccess, ReadsAreFreeOnlyOnLoopbackAndActionsAlwaysNeedTheToken) {
  const std::string token(64, 'a');
  const std::string good = "Bearer " + token;
  struct row {
    const char* name;
    bool loopback;
    std::string configured;
    bool action;
    std::string authorization;
    http_verdict want;
  };
  const std::vector<row> table = {
      {"loopback read, no token", true, token, false, "", http_verdict::allow},
      {"loopback read, no token configured", true, "", false, "", http_verdict::allow},
      {"remote read with the token", false, token, false, good, http_verdict::allow},
      {"remote read without", false, token, false, "", http_verdict::refuse},
      {"remote read, wrong token", false, token, false, "Bearer " + std::string(64, 'b'), http_verdict::refuse},
      {"remote read, token not as bearer", false, token, false, token, http_verdict::refuse},
      {"remote read, a prefix of the token", false, token, false, "Bearer aaaa", http_verdict::refuse},
      {"loopback action with the token", true, token, true, good, http_verdict::allow},
      {"loopback action without", true, token, true, "", http_verdict::refuse},
      {"action, no token configured", true, "", true, "Bearer ", http_verdict::refuse},
      {"remote action with the token", false, token, true, good, http_verdict::allow},
  };
  for (const auto& r : table) {
    SCOPED_TRACE(r.name);
    EXPECT_EQ(decide_http({r.loopback, r.configured}, r.action, r.authorization), r.want);
  }
}

TEST(HttpAccess, LoopbackHostsAreRecognised) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]"}) EXPECT_TRUE(is_loopback_host(host));
  for (const char* host : {"0.0.0.0", "10.0.0.1", "128.0.0.1", "example.org", ""}) EXPECT_FALSE(is_loopback_host(host));
}

TEST(HttpAccess, TheTokenIsMadeOnceAndKept) {
  testing::temp_dir dir;
  auto first = load_or_create_http_token(dir.str());
  ASSERT_TRUE(first) << first.err().describe();
  EXPECT_EQ(first->size(), 64u);
  auto again = load_or_create_http_token(dir.str());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *first);
}

TEST(PrometheusText, RendersTheViewsWithConventionalNamesAndEscapedLabels) {
  using json = nlohmann::json;
  const json status = {
      {"epoch", 4},
      {"state", "training"},
      {"workers",
       {{{"id", "worker/1.0"},
         {"step", 120},
         {"loss", 2.5},
         {"tokens_per_s", 100.0},
         {"bytes_sent", 1000},
         {"bytes_received", 900}}}},
      {"fragments", {{{"id", 0}, {"round", 6}}}},
      {"round_duration_s", {{"le", {0.1, 1.0}}, {"at_most", {1, 5}}, {"count", 6}, {"sum", 4.5}}},
      {"last_eval", {{"step", 100}, {"val_loss", 2.25}}},
      {"refused",
       {{"head", {{"stale_epoch", 3}}}, {"node/\"x\"", {{"duplicate", 1}}}, {"total", {{"stale_epoch", 3}}}}},
      {"storage", {{"ok", true}, {"failed_commits", 0}}},
      {"head_link", {{"bytes_in", 10}, {"bytes_out", 20}, {"bytes_relayed", 0}}},
      {"security", {{"auth_denied", 2}, {"handshakes_failed", 1}}},
      {"data", {{"epoch", 1}, {"consumed", 40}, {"in_flight", 20}, {"returned", 10}, {"partial", 0}}}};
  const json members = {{{"node_id", 1}, {"state", "active"}, {"last_heartbeat_s", 0.5}, {"worker_restarts", 2}},
                        {{"node_id", 2}, {"state", "dead"}, {"last_heartbeat_s", 30.0}}};
  const auto text = prometheus_text(status, members, metrics_detail::per_node);
  for (const char* line : {"atoll_epoch 4\n",
                           "atoll_members{state=\"active\"} 1\n",
                           "atoll_members{state=\"dead\"} 1\n",
                           "atoll_member_heartbeat_age_seconds{node=\"2\"} 30\n",
                           "atoll_worker_restarts_total{node=\"1\"} 2\n",
                           "atoll_worker_sent_bytes_total{worker=\"worker/1.0\"} 1000\n",
                           "atoll_fragment_rounds_committed_total{fragment=\"0\"} 6\n",
                           "atoll_round_duration_seconds_bucket{le=\"1\"} 5\n",
                           "atoll_round_duration_seconds_bucket{le=\"+Inf\"} 6\n",
                           "atoll_round_duration_seconds_sum 4.5\n",
                           "atoll_heldout_loss 2.25\n",
                           "atoll_refused_messages_total{process=\"head\",reason=\"stale_epoch\"} 3\n",
                           "atoll_refused_messages_total{process=\"node/\\\"x\\\"\",reason=\"duplicate\"} 1\n",
                           "atoll_keeper_healthy 1\n",
                           "atoll_head_link_bytes_total{direction=\"out\"} 20\n",
                           "# TYPE atoll_round_duration_seconds histogram\n",
                           "atoll_data_epoch 1\n",
                           "atoll_data_units{state=\"consumed\"} 40\n",
                           "atoll_data_units{state=\"in_flight\"} 20\n",
                           "atoll_data_units{state=\"returned\"} 10\n"})
    EXPECT_NE(text.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << text;
  EXPECT_EQ(text.find("process=\"total\""), std::string::npos) << "the total is a sum, not a process";

  // By default a node or worker is no series of its own: a thousand nodes are a few lines.
  const auto summary = prometheus_text(status, members);
  for (const char* line : {"atoll_members{state=\"active\"} 1\n", "atoll_member_heartbeat_age_seconds_max 0.5\n",
                           "atoll_worker_restarts_total 2\n", "atoll_workers 1\n", "atoll_worker_step_min 120\n",
                           "atoll_worker_step_max 120\n", "atoll_worker_sent_bytes_total 1000\n", "atoll_epoch 4\n",
                           "atoll_refused_messages_total{process=\"head\",reason=\"stale_epoch\"} 3\n",
                           "atoll_refused_messages_total{process=\"nodes\",reason=\"duplicate\"} 1\n"})
    EXPECT_NE(summary.find(line), std::string::npos) << "missing: " << line << "\nin:\n" << summary;
  for (const char* label : {"node=", "worker="})
    EXPECT_EQ(summary.find(label), std::string::npos) << "a series per node or worker: " << label;
  // A worker whose loss is not a number yet (NaN reads back as null) counts as 0, not an error.
  auto no_loss = status;
  no_loss["workers"].push_back({{"id", "worker/2.0"}, {"step", 3}, {"loss", nullptr}});
  const auto with_null = prometheus_text(no_loss, members);
  EXPECT_NE(with_null.find("atoll_worker_step_min 3\n"), std::string::npos) << with_null;
  EXPECT_NE(with_null.find("atoll_worker_loss_mean 1.25\n"), std::string::npos) << with_null;
}

}  // namespace
}  // namespace atl
