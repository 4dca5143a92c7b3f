// The dashboard's answer (views.hpp, `dashboard`): what the page shows, summarized so that
// one request a second costs the same at a thousand nodes as at two.
#include <map>

#include "actors/registry/views.hpp"

namespace atl::views {
namespace {

json members_by_state(const registry_state& st) {
  std::map<std::string, std::size_t> counts;
  for (const auto& [_, n] : st.nodes) counts[shown_state(st, n)]++;
  json out = json::object();
  for (const auto& [state, n] : counts) out[state] = n;
  return out;
}

json workers_summary(const registry_state& st) {
  std::size_t count = 0, stepped = 0, done = 0;
  double loss = 0;
  std::uint64_t sent = 0;
  for (const auto& [_, w] : st.workers) {
    ++count;
    done += w.done;
    sent += w.bytes_sent;
    if (w.step > 0) {  // a worker reports loss 0 before its first step
      ++stepped;
      loss += w.loss;
    }
  }
  return {{"count", count},
          {"stepped", stepped},
          {"done", done},
          {"mean_loss", stepped ? json(loss / static_cast<double>(stepped)) : json()},
          {"bytes_sent", sent}};
}

// A fragment's workers as counts, and the few worth a look by name: those at the keeper's
// round whose digest differs (theta_global diverged) first, then those behind it.
void summarize_workers(json& fragment) {
  const json workers = fragment.value("workers", json::array());
  const auto keeper_round = fragment.value("keeper_round", json());
  const auto keeper_digest = fragment.value("keeper_digest", json());
  std::size_t at_round = 0, agreeing = 0;
  json differing = json::array(), others = json::array();
  for (const auto& w : workers) {
    const bool at = !keeper_round.is_null() && w["round"] == keeper_round;
    at_round += at;
    if (at && w["digest"] == keeper_digest) ++agreeing;
    else (at && !keeper_digest.is_null() ? differing : others).push_back(w);
  }
  json named = json::array();
  for (const auto* list : {&differing, &others})
    for (const auto& w : *list)
      if (named.size() < listed_workers) named.push_back(w);
  fragment["workers"] = named;
  fragment["workers_total"] = workers.size();
  fragment["workers_at_keeper_round"] = at_round;
  fragment["workers_agreeing"] = agreeing;
}

}  // namespace

expected<json> dashboard(const registry_state& st, time_point now, const std::string& member_query) {
  auto page = members(st, now, member_query);
  if (!page) return page.err();
  auto all_fragments = fragments(st, true);
  for (auto& f : all_fragments) summarize_workers(f);
  auto why = explain(st, now, "");
  if (why)  // a round of a thousand participants may miss a thousand: the first few are named
    for (auto& e : *why) {
      auto& missing = e["missing"];
      if (missing.is_array() && missing.size() > listed_workers) {
        e["missing_total"] = missing.size();
        missing.erase(missing.begin() + static_cast<std::ptrdiff_t>(listed_workers), missing.end());
      }
    }
  json out = {{"status", status_without_lists(st, now)},
              {"members", *page},
              {"fragments", all_fragments},
              {"explain", why ? *why : json::array()}};
  // Refusals per process grow with the nodes that had any: the page shows the totals.
  auto& refused = out["status"]["refused"];
  refused = {{"total", refused.value("total", json::object())}, {"processes", refused.size() - refused.count("total")}};
  out["status"]["members_by_state"] = members_by_state(st);
  out["status"]["members_total"] = st.nodes.size();
  out["status"]["workers_summary"] = workers_summary(st);
  return out;
}

}  // namespace atl::views
