#pragma once
// Whether a node is alive, from its heartbeats and its connection to the head. A killed
// process closes its TCP connection at once; a stopped or cut-off machine does not, and
// only its lease (cluster.lease_ms without a heartbeat) tells. A closed connection makes
// the node a suspect that must answer within cluster.confirm_ms (the registry asks it for
// a heartbeat), so that a connection that drops and comes back is not a death:
//
//            heartbeat (renews the lease)
//            +---------+
//            v         |
//   ----> alive -------+---- connection closed ----> suspected
//            ^                                          |
//            +---------------- heartbeat ---------------+
//   alive or suspected -- lease passed since the last heartbeat --> dead (lease_expired)
//   suspected -- confirm passed since the connection closed --> dead (connection_lost)
//
// Pure: no clock, no CAF (atoll_decisions).
#include <chrono>
#include <optional>

namespace atl {

enum class liveness_verdict { alive, lease_expired, connection_lost };
const char* to_string(liveness_verdict v);

struct liveness_facts {
  std::chrono::milliseconds since_heartbeat{0};
  // Since the connection closed, while no heartbeat came after it; nullopt: not suspected.
  std::optional<std::chrono::milliseconds> since_connection_closed;
  std::chrono::milliseconds lease{0};
  std::chrono::milliseconds confirm{0};  // 0: a closed connection proves nothing (lease only)
};

liveness_verdict judge_liveness(const liveness_facts& facts);

}  // namespace atl
