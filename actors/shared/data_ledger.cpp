#include "actors/shared/data_ledger.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace atl {

nlohmann::json data_ledger(const data::cursor_snapshot& cursor, std::uint64_t seed,
                           const std::vector<std::uint64_t>& exported_rounds, std::uint32_t shards) {
  using json = nlohmann::json;
  shards = std::max<std::uint32_t>(1, shards);
  const auto n = cursor.config.units;
  // (epoch, fragment, round) -> unit ids, in position order within each commit.
  std::map<std::tuple<std::uint64_t, std::uint32_t, std::uint64_t>, std::vector<std::uint64_t>> learned;
  for (const auto& chunk : cursor.chunks)
    for (const auto& c : chunk.ledger) {
      if (c.fragment >= exported_rounds.size() || c.round > exported_rounds[c.fragment]) continue;
      auto& ids = learned[{chunk.id.epoch, c.fragment, c.round}];
      for (auto p = c.positions.begin; p < c.positions.end; ++p)
        ids.push_back(data::unit_at(seed, chunk.id.epoch, p, n));
    }
  json epochs = json::array();
  for (const auto& [key, ids] : learned) {
    const auto [epoch, unit, round] = key;
    if (epochs.empty() || epochs.back()["epoch"] != epoch)
      epochs.push_back({{"epoch", epoch}, {"consumed", json::array()}});
    json commit = {{"fragment", unit / shards}, {"round", round}, {"units", ids}};
    if (shards > 1) commit["slice"] = unit % shards;
    epochs.back()["consumed"].push_back(std::move(commit));
  }
  return {{"units", n},       {"chunk", cursor.config.chunk},
          {"seed", seed},     {"fragments", cursor.config.fragments / shards},
          {"shards", shards}, {"exported_rounds", exported_rounds},
          {"epochs", epochs}};
}

}  // namespace atl
