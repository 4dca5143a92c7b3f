#pragma once
// The head's metrics in the Prometheus text format (version 0.0.4), rendered from the
// registry's own views (`atollctl status --json` and `members --json`), so /metrics and
// atollctl can never disagree. Names follow Prometheus conventions: an `atoll_` prefix,
// base units in the name (_seconds, _bytes), _total for counters.
#include <string>

#include <nlohmann/json.hpp>

namespace atl {

std::string prometheus_text(const nlohmann::json& status, const nlohmann::json& members);

}  // namespace atl
