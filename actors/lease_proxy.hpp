#pragma once
// A remote node as a local actor ("proxy"): it lives while the node's lease is renewed and
// quits with exit_reason::unreachable once cluster.lease_ms passes without a renewal. Local
// actors then supervise remote peers the CAF way, by monitoring the proxy and handling its
// down message, instead of polling timestamps (CAF monitors cannot see other processes).
//
//   alive --renew--> alive (deadline moved)
//   alive --tick, lease passed since the last renew--> quits (unreachable)
//   alive --exit from its owner (the node left)--> quits (user_shutdown)
#include <chrono>
#include <string>

#include <caf/stateful_actor.hpp>

namespace atl {

struct lease_proxy_state {
  std::string peer;  // "node/N", for the logs
  std::chrono::milliseconds lease{0};
  std::chrono::steady_clock::time_point renewed;
  static inline const char* name = "lease_proxy";
};

caf::behavior lease_proxy(caf::stateful_actor<lease_proxy_state>* self, std::string peer,
                          std::chrono::milliseconds lease);

}  // namespace atl
