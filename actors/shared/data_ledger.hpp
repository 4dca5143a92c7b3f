#pragma once
// The ledger of a run's data (`atoll export --ledger FILE`): for each epoch, the units the
// exported model learned, with the fragment and the round that committed each, read from
// the data cursor's snapshot (actors/decisions/data_cursor.hpp). Only rounds up to the
// exported one of each fragment count: a unit a later round committed is not in the file's
// parameters, so it is not in its ledger either.
//
//   {"units": N, "chunk": C, "seed": S, "fragments": P,
//    "exported_rounds": [r_0, ..., r_{P-1}],
//    "epochs": [{"epoch": e, "consumed": [{"fragment": p, "round": r, "units": [ids]}, ...]}, ...]}
//
// Unit ids are positions of the epoch's order mapped through unit_at(seed, epoch, ...): the
// windows or records themselves, in the order they were learned within a commit.
#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/decisions/data_cursor.hpp"

namespace atl {

// `exported_rounds[p]`: the round of sync unit p the export holds (a commit after it is
// left out). A fragment the vector does not reach counts nothing.
nlohmann::json data_ledger(const data::cursor_snapshot& cursor, std::uint64_t seed,
                           const std::vector<std::uint64_t>& exported_rounds);

}  // namespace atl
