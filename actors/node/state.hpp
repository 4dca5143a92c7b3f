#pragma once
// What a node agent holds (actors/node/node_agent.hpp has its protocol): its workers and
// their restart budgets, what the registry placed here, the routes it follows. A header of
// its own so that the files beside the shell (node_workers.cpp) include the state, not the shell.
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/stateful_actor.hpp>

#include "actors/decisions/restart_budget.hpp"
#include "actors/node/node_config.hpp"
#include "actors/node/placed_actors.hpp"
#include "actors/worker/done.hpp"
#include "actors/worker/replica.hpp"
#include "runtime/core/expected.hpp"
#include "runtime/core/thread_layout.hpp"
#include "runtime/transport/peer_routes.hpp"
#include "runtime/transport/route_delta.hpp"
#include "runtime/transport/transport.hpp"

namespace atl {

struct supervised_worker {
  std::string id;
  replica_spec spec;
  caf::actor handle;
  restart_budget budget;  // R restarts in T, from cluster.restart_limit / restart_window_ms
  bool finished = false;
  std::optional<worker_done_report> done;  // its final report, sent again after a reconnect
};

struct node_agent_state {
  enum class phase { registering, running, done };
  phase current = phase::registering;
  node_agent_config cfg;
  transport* net = nullptr;
  directory* local = nullptr;
  cluster_identity* cluster = nullptr;
  std::unique_ptr<mailer> mail;
  std::uint32_t node_id = 0;
  std::uint64_t epoch = 0;
  // The highest epoch a message from the registry carried. The registry saves an epoch
  // before it sends it, and a head that takes over starts above every saved one, so a
  // message below this is from a head that was deposed (or a stale copy): refused.
  std::uint64_t registry_epoch = 0;
  run_config run;
  std::vector<supervised_worker> workers;
  std::vector<thread_layout> cpu_worker_layouts;  // from prepare; the one a trial kept, after it
  placed_actors placed;  // coordinators and a keeper replica the registry placed here
  route_follower routes;  // the registry's PeerTable as this node holds it (runtime/transport/route_delta.hpp)
  std::uint64_t connections_seen = 0;  // the transport's count when last checked
  std::uint64_t worker_restarts = 0;  // restarts ordered by this supervisor (in each Heartbeat)
  bool failed = false;
  bool leave_requested = false;  // SIGTERM while hosting a keeper: waiting for the hand-over
  static inline const char* name = "node_agent";
};

}  // namespace atl
