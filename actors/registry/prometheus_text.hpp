#pragma once
// The head's metrics in the Prometheus text format (version 0.0.4), rendered from the
// registry's own views (`atollctl status --json` and `members --json`), so /metrics and
// atollctl can never disagree. Names follow Prometheus conventions: an `atoll_` prefix,
// base units in the name (_seconds, _bytes), _total for counters.
//
// By default the node and worker series are summaries (the oldest heartbeat of a live
// member, restarts and bytes summed, steps' least and most), so that a thousand-node run
// is a page of series, not thousands; `per_node` gives one series a node and a worker
// instead (GET /metrics?per_node=1).
#include <string>

#include <nlohmann/json.hpp>

namespace atl {

enum class metrics_detail { summary, per_node };

std::string prometheus_text(const nlohmann::json& status, const nlohmann::json& members,
                            metrics_detail detail = metrics_detail::summary);

}  // namespace atl
