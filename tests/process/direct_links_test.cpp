// Process tier, the data plane (issue 13 part 1): a CURVE cluster with a key per node, two
// nodes that listen and one that does not (--no-listen).
//  - tensors of the listening nodes go node to node; the relayed node's go through the head,
//    and the run still agrees at its final round;
//  - `atollctl members` says which node is relayed;
//  - a member holding a valid key cannot speak for another node's worker or for a
//    coordinator placed elsewhere: not on the head, not on another node's data endpoint.
// SIGKILL and SIGSTOP of the coordinator's node over direct links are the failover tests
// (tests/process/failover_test.cpp): every node there listens by default.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include "runtime/core/actor_id.hpp"
#include "runtime/transport/control_client.hpp"
#include "runtime/transport/security.hpp"
#include "runtime/transport/wire.hpp"
#include "tests/support/cluster_helpers.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::eventually;
using testing::subprocess;
using namespace std::chrono_literals;

// A contribution as `sender` to `receiver`, in the current epoch: only the sender check can
// stop it.
wire::frames claimed(const std::string& cluster, std::uint64_t epoch, const std::string& sender,
                     const std::string& receiver) {
  wire::outgoing out;
  out.envelope.setClusterId(cluster);
  out.envelope.setSender(sender);
  out.envelope.setReceiver(receiver);
  out.envelope.setEpoch(epoch);
  auto c = out.envelope.initContribution();
  c.setRound(1000000);
  c.setWeight(1.0f);
  c.setCount(1);
  const float one = 1.0f;
  out.tensors.push_back(wire::tensor::from_floats(&one, 1));
  return wire::encode(out);
}

void send_all(const std::string& endpoint, const link_security& keys, const wire::frames& frames, int times) {
  zmq::context_t ctx;
  zmq::socket_t sock(ctx, zmq::socket_type::dealer);
  sock.set(zmq::sockopt::linger, 2000);
  apply_client_security(sock, keys);
  sock.connect(endpoint);
  for (int n = 0; n < times; ++n)
    for (std::size_t i = 0; i < frames.size(); ++i)
      sock.send(zmq::const_buffer(frames[i].data(), frames[i].size()),
                i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
}

std::uint64_t conflicts(const json& status, const std::string& process) {
  const auto& by_process = status["refused"];
  if (!by_process.contains(process)) return 0;
  return by_process[process].value("sender_conflict", std::uint64_t{0});
}

TEST(DirectLinks, TensorsGoNodeToNodeARelayedNodeStillTrainsAndAKeySpeaksOnlyForItsNode) {
  testing::temp_dir dir;
  const std::string keys_dir = dir.sub("keys"), head_dir = dir.sub("head");
  auto [kg_code, kg_out] = testing::run_command({ATOLL_BIN, "keygen", "--out", keys_dir}, dir.sub("keygen.log"));
  ASSERT_EQ(kg_code, 0) << kg_out;
  std::vector<std::string> key_files;
  for (const char* name : {"a", "b", "c"}) {
    auto path = add_client_key(keys_dir, name);
    ASSERT_TRUE(path) << path.err().describe();
    key_files.push_back(*path);
  }
  auto ctl_keys = load_client_security(keys_dir);
  ASSERT_TRUE(ctl_keys);

  auto head_args = testing::mlp_head(head_dir, 8000, {"--keys", keys_dir, "--set", "run.min_workers=3"});
  subprocess head(head_args, dir.sub("head.log"));
  const std::string ep = testing::wait_for_endpoint(head_dir, head);
  ASSERT_FALSE(ep.empty()) << head.output();
  std::vector<std::unique_ptr<subprocess>> nodes;
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> args = {ATOLL_BIN, "join",   "--head",       ep,          "--threads", "1",
                                     "--keys",  keys_dir, "--client-key", key_files[i]};
    if (i == 2) args.push_back("--no-listen");
    nodes.push_back(std::make_unique<subprocess>(args, dir.sub("node" + std::to_string(i) + ".log")));
  }
  ASSERT_TRUE(eventually(
      [&] {
        const auto f = testing::ask(ep, "fragments", *ctl_keys);
        return f.is_array() && !f.empty() && f[0]["round"].get<int>() >= 2;
      },
      60s, 200ms))
      << head.output();

  // Which node is which: by pid. Keys by node id; the relayed one has no data endpoint.
  const auto members = testing::ask(ep, "members", *ctl_keys);
  ASSERT_EQ(members.size(), 3u) << members.dump();
  std::map<int, link_security> key_of;  // node id -> its key pair (as a client)
  std::map<int, std::string> endpoint_of;  // node id -> data endpoint, listening nodes only
  for (const auto& m : members) {
    for (int i = 0; i < 3; ++i) {
      if (nodes[i]->pid() != m["pid"].get<int>()) continue;
      const int id = m["node_id"];
      key_of[id] = *load_client_security(keys_dir, key_files[i]);
      EXPECT_EQ(m["link"], i == 2 ? "relayed" : "direct") << m.dump();
      if (i != 2) endpoint_of[id] = m["data_endpoint"];
    }
  }
  ASSERT_EQ(key_of.size(), 3u) << members.dump();
  const auto status = testing::ask(ep, "status", *ctl_keys);
  const std::string cluster = status["cluster_id"];
  const std::uint64_t epoch = status["epoch"];
  std::string coordinator_host;
  for (const auto& a : testing::ask(ep, "actors", *ctl_keys))
    if (a["id"] == "coord/0") coordinator_host = a["process"];
  ASSERT_FALSE(coordinator_host.empty());

  // The impersonator: a member whose node does not host coord/0, sending as the worker of
  // another node and as coord/0, to the head and to every other node's data endpoint.
  int impersonator = 0;
  for (const auto& [id, _] : key_of)
    if (node_actor_id(id) != coordinator_host) impersonator = id;
  const int times = 10;
  int expected_on_head = 0;
  std::map<int, int> expected_on_node;
  for (const auto& [victim, _] : key_of) {
    if (victim == impersonator) continue;
    const auto as_worker = claimed(cluster, epoch, worker_id(victim, 0), "coord/0");
    const auto as_coordinator = claimed(cluster, epoch, "coord/0", worker_id(victim, 0));
    send_all(ep, key_of[impersonator], as_worker, times);
    expected_on_head += times;
    if (!endpoint_of.count(victim)) continue;
    auto to_victim = key_of[impersonator];
    to_victim.server_public_key = key_of[victim].own.public_key;  // the node's data endpoint is its own key
    send_all(endpoint_of[victim], to_victim, as_worker, times);
    send_all(endpoint_of[victim], to_victim, as_coordinator, times);
    expected_on_node[victim] += 2 * times;
  }
  ASSERT_GT(expected_on_node.size(), 0u);
  // Nodes report their counters with each heartbeat.
  json after;
  EXPECT_TRUE(eventually(
      [&] {
        after = testing::ask(ep, "status", *ctl_keys);
        if (!after.is_object() || conflicts(after, "head") < static_cast<std::uint64_t>(expected_on_head)) return false;
        for (const auto& [victim, count] : expected_on_node)
          if (conflicts(after, node_actor_id(victim)) < static_cast<std::uint64_t>(count)) return false;
        return true;
      },
      20s, 250ms))
      << "impersonator node " << impersonator << "; refused: " << after["refused"].dump();

  // The run finishes and agrees; the relayed node's tensors crossed the head.
  for (auto& n : nodes) EXPECT_EQ(n->wait(180s), 0) << n->output();
  const auto fragments = testing::ask(ep, "fragments", *ctl_keys);
  ASSERT_TRUE(fragments.is_array() && !fragments.empty());
  EXPECT_EQ(fragments[0]["round"], 20);
  EXPECT_EQ(testing::agreeing_at_final_round(fragments), 3) << fragments.dump();
  const auto final_status = testing::ask(ep, "status", *ctl_keys);
  EXPECT_GT(final_status["head_link"]["tensor_bytes_relayed"].get<std::uint64_t>(), 0u)
      << final_status["head_link"].dump();
  EXPECT_TRUE(control_request(ep, "down", "", 5000ms, *ctl_keys));
  EXPECT_EQ(head.wait(15s), 0) << head.output();
}

}  // namespace
}  // namespace atl
