#pragma once
// The answers of `atollctl` (ControlRequest -> ControlReply JSON), derived from the
// registry's state only: no second source of truth. Pure reads; `now` is the registry's
// clock, for ages ("since_s", "last_heartbeat_s", "uptime_s").
#include <chrono>

#include <nlohmann/json.hpp>

#include "actors/registry/state.hpp"
#include "runtime/core/expected.hpp"

namespace atl::views {

using json = nlohmann::json;
using time_point = std::chrono::steady_clock::time_point;

json status(const registry_state& st, time_point now);
json members(const registry_state& st, time_point now);
// The members a query picks (actors/decisions/member_query.hpp: "state=dead,limit=50,offset=0";
// "" is every member); a bad query is refused.
expected<json> members(const registry_state& st, time_point now, const std::string& query);
json fragments(const registry_state& st, bool with_keeper);  // with_keeper: digests, keeper's round
json actors(const registry_state& st);
expected<json> checkpoints(const registry_state& st);
// Per fragment (all, or the one `fragment` names), what its round waits for and since when
// (actors/decisions/round_explain.hpp). A bad fragment argument is refused.
expected<json> explain(const registry_state& st, time_point now, const std::string& fragment);

// The state `atollctl members` shows: a syncing node shows as active while the run is not
// training (there is no round to sync with).
const char* shown_state(const registry_state& st, const node_view& n);

}  // namespace atl::views
