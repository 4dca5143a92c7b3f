#pragma once
// The ledger of a run's data (`atoll export --ledger FILE`): for each epoch, the units the
// exported model learned, with the fragment and the round that committed each, read from
// the data cursor's snapshot (actors/decisions/data_cursor.hpp). Only rounds up to the
// exported one of each fragment count: a unit a later round committed is not in the file's
// parameters, so it is not in its ledger either.
//
//   {"units": N, "chunk": C, "seed": S, "fragments": P, "shards": K,
//    "exported_rounds": [r_0, ..., r_{PK-1}],
//    "epochs": [{"epoch": e, "consumed": [{"fragment": p, "round": r, "units": [ids]}, ...]}, ...]}
//
// Unit ids are positions of the epoch's order mapped through unit_at(seed, epoch, ...): the
// windows or records themselves, in the order they were learned within a commit. With
// sharded rounds (diloco.shards = K > 1) each slice of a fragment commits rounds of its own:
// a commit names its fragment and its "slice", and exported_rounds has one round per sync
// unit u = p K + s.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/decisions/data_cursor.hpp"

namespace atl {

// `exported_rounds[u]`: the round of sync unit u the export holds (a commit after it is
// left out). A unit the vector does not reach counts nothing. `shards`: the run's K.
nlohmann::json data_ledger(const data::cursor_snapshot& cursor, std::uint64_t seed,
                           const std::vector<std::uint64_t>& exported_rounds, std::uint32_t shards = 1);

}  // namespace atl
