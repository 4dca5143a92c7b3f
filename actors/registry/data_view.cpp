// `atollctl data` (views.hpp, `data`): the run's progress through its data, from the data
// cursor alone. The same keys whether or not a worker has leased data yet, so scripts can
// read them from a run's first second.
#include "actors/registry/views.hpp"

namespace atl::views {

json data_progress(const registry_state& st) {
  json out = {{"leasing", st.data.has_value()},
              {"epoch", 0},
              {"units", 0},
              {"chunk", 0},
              // The configured bound (run.data_epochs, 0: no end) and the passes ended: until
              // 2026-12-07 the bound was `epochs`, which a script read as the epochs done.
              {"epoch_limit", st.cfg.data_epochs},
              {"epochs_completed", 0},
              {"consumed", 0},
              {"in_flight", 0},
              {"returned", 0},
              {"partial", 0},
              {"finished", false}};
  if (st.data_damaged) out["error"] = st.data_damaged->describe();
  if (!st.data) return out;
  const auto p = st.data->progress_now();
  out["epoch"] = p.epoch;
  out["epochs_completed"] =
      p.finished && st.cfg.data_epochs > 0 ? static_cast<std::uint64_t>(st.cfg.data_epochs) : p.epoch;
  out["units"] = p.units;
  out["chunk"] = st.data->config().chunk;
  out["consumed"] = p.consumed;
  out["in_flight"] = p.in_flight;
  out["returned"] = p.returned;
  out["partial"] = p.partial;
  out["finished"] = p.finished;
  return out;
}

json data(const registry_state& st) {
  auto out = data_progress(st);
  out["chunks"] = json::array();
  if (!st.data) return out;
  // The chunks still moving: leased (with their worker) and returned (waiting for a lease).
  for (const auto& c : st.data->snapshot().chunks) {
    if (c.state != data::chunk_state::leased && c.state != data::chunk_state::returned) continue;
    const auto positions = st.data->positions_of(c.id);
    out["chunks"].push_back({{"epoch", c.id.epoch},
                             {"index", c.id.index},
                             {"state", to_string(c.state)},
                             {"holder", c.state == data::chunk_state::leased ? c.holder : ""},
                             {"begin", positions.begin},
                             {"end", positions.end}});
  }
  return out;
}

}  // namespace atl::views
