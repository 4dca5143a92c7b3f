#include "storage/checkpoint_rounds.hpp"

#include <algorithm>
#include <map>
#include <string>

namespace atl {

std::vector<stored_round> rounds_by_number(const std::vector<checkpoint_summary>& stored, std::size_t fragment_count) {
  std::map<std::uint64_t, std::vector<checkpoint_summary>> by_round;
  for (const auto& s : stored)
    if (s.fragment < fragment_count) by_round[s.round].push_back(s);
  std::vector<stored_round> out;
  for (auto& [round, fragments] : by_round) {
    std::sort(fragments.begin(), fragments.end(),
              [](const checkpoint_summary& a, const checkpoint_summary& b) { return a.fragment < b.fragment; });
    // The same round of a fragment from several keepers (`atoll export` reads the replicas
    // too) counts once.
    fragments.erase(
        std::unique(fragments.begin(), fragments.end(),
                    [](const checkpoint_summary& a, const checkpoint_summary& b) { return a.fragment == b.fragment; }),
        fragments.end());
    stored_round r;
    r.round = round;
    r.complete = fragments.size() == fragment_count;
    r.fragments = std::move(fragments);
    out.push_back(std::move(r));
  }
  return out;
}

expected<std::vector<checkpoint_summary>> choose_export(const std::vector<checkpoint_summary>& stored,
                                                        std::size_t fragment_count,
                                                        std::optional<std::uint64_t> round) {
  std::vector<std::optional<checkpoint_summary>> chosen(fragment_count);
  for (const auto& s : stored) {
    if (s.fragment >= fragment_count) continue;
    auto& slot = chosen[s.fragment];
    if (round ? s.round == *round : (!slot || s.round > slot->round)) slot = s;
  }
  std::vector<checkpoint_summary> out;
  for (std::size_t f = 0; f < fragment_count; ++f) {
    if (chosen[f]) {
      out.push_back(*chosen[f]);
      continue;
    }
    if (!round) return make_error(errc::not_ready, "fragment " + std::to_string(f) + " has no committed round yet");
    std::string whole;
    for (const auto& r : rounds_by_number(stored, fragment_count))
      if (r.complete) whole += (whole.empty() ? "" : ", ") + std::to_string(r.round);
    return make_error(errc::wrong_round,
                      "round " + std::to_string(*round) + " is not stored for fragment " + std::to_string(f) +
                          " (rounds stored for every fragment: " + (whole.empty() ? "none" : whole) + ")");
  }
  return out;
}

}  // namespace atl
