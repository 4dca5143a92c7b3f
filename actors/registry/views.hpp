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

// The run at a glance (`atollctl status`): the status without lists, each fragment, the
// members counted by state (`member_states`, `members_total`) and the workers' steps
// (`worker_steps`, `workers_total`), with at most `status_rows` members and workers listed.
json status(const registry_state& st, time_point now);
constexpr std::size_t status_rows = 256;
// The status without its lists of members, workers and fragments (each a row per node or
// worker: a thousand at a thousand nodes).
json status_without_lists(const registry_state& st, time_point now);
// The dashboard's one request a second (GET /api/dashboard?state=&limit=&offset=): the status
// without its lists, members counted by state, the workers summarized (count, mean loss of
// those that stepped, bytes sent), one page of members (the query, as `members`), each
// fragment with its workers counted (at the keeper's round, agreeing with its digest) and at
// most `listed_workers` of them named (those that differ first), and what each round waits
// for. Its size does not grow with the members past a page (actors/registry/dashboard_view.cpp).
expected<json> dashboard(const registry_state& st, time_point now, const std::string& member_query);
constexpr std::size_t listed_workers = 10;
json members(const registry_state& st, time_point now);
// The members a query picks (actors/decisions/member_query.hpp: "state=dead,limit=50,offset=0";
// "" is every member); a bad query is refused.
expected<json> members(const registry_state& st, time_point now, const std::string& query);
// What the head's link carried by payload kind: {"round_report": {"in": B, "out": B}, ...},
// the kinds with any bytes (runtime/transport/transport.hpp, traffic_counters::kind_bytes_in).
json head_link_by_kind(const traffic_counters& c);
json fragments(const registry_state& st, bool with_keeper);  // with_keeper: digests, keeper's round
json actors(const registry_state& st);
expected<json> checkpoints(const registry_state& st);
// Per fragment (all, or the one `fragment` names), what its round waits for and since when
// (actors/decisions/round_explain.hpp). A bad fragment argument is refused.
expected<json> explain(const registry_state& st, time_point now, const std::string& fragment);

// The run's data cursor (`atollctl data`): the epoch and the units consumed, in flight,
// returned and learned in part, with every chunk not yet settled (actors/registry/data_view.cpp).
json data(const registry_state& st);
// The same without the chunks: the status's `data`, which /metrics reads.
json data_progress(const registry_state& st);

// The state `atollctl members` shows: a syncing node shows as active while the run is not
// training (there is no round to sync with).
const char* shown_state(const registry_state& st, const node_view& n);

}  // namespace atl::views
