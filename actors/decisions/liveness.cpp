#include "actors/decisions/liveness.hpp"

namespace atl {

const char* to_string(liveness_verdict v) {
  switch (v) {
    case liveness_verdict::alive: return "alive";
    case liveness_verdict::lease_expired: return "lease_expired";
    case liveness_verdict::connection_lost: return "connection_lost";
  }
  return "unknown";
}

liveness_verdict judge_liveness(const liveness_facts& f) {
  if (f.since_heartbeat >= f.lease) return liveness_verdict::lease_expired;
  if (f.confirm.count() > 0 && f.since_connection_closed && *f.since_connection_closed >= f.confirm)
    return liveness_verdict::connection_lost;
  return liveness_verdict::alive;
}

}  // namespace atl
