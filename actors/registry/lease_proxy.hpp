#pragma once
// A remote node as a local actor ("proxy"): it lives while the node is alive and quits
// when it is not, as actors/decisions/liveness.hpp judges: with exit_reason::unreachable once
// cluster.lease_ms passes without a renewal, and with remote_link_unreachable once its
// connection closed (suspect) and no renewal came within the confirm window. Local actors
// then supervise remote peers the CAF way, by monitoring the proxy and handling its down
// message, instead of polling timestamps (CAF monitors cannot see other processes).
//
//   alive --renew(waited)--> alive (deadline moved to the heartbeat's arrival + lease)
//   alive --suspect--> suspected --renew--> alive
//   alive or suspected --tick at the lease's end, no renew since--> quits (unreachable)
//   suspected --confirm passed since suspect--> quits (remote_link_unreachable)
//   any --exit from its owner (the node left)--> quits (user_shutdown)
#include <chrono>
#include <optional>
#include <string>

#include <caf/stateful_actor.hpp>

namespace atl {

struct lease_proxy_state {
  std::string peer;  // "node/N", for the logs
  std::chrono::milliseconds lease{0};
  std::chrono::milliseconds confirm{0};  // 0: a suspicion is only logged, the lease decides
  std::chrono::steady_clock::time_point renewed;  // on the actor clock (simulated in tests)
  std::optional<std::chrono::steady_clock::time_point> suspected;  // since; cleared by a renewal
  static inline const char* name = "lease_proxy";
};

caf::behavior lease_proxy(caf::stateful_actor<lease_proxy_state>* self, std::string peer,
                          std::chrono::milliseconds lease, std::chrono::milliseconds confirm = {});

}  // namespace atl
