#pragma once
// The data pieces a contribution trained on (run.data_cursor), as the Contribution, the
// RoundReport and the DataTie carry them.
#include <vector>

#include "actors/decisions/data_cursor.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

void put_data_pieces(capnp::List<schema::DataPiece>::Builder list, const std::vector<data::piece>& pieces);
std::vector<data::piece> read_data_pieces(capnp::List<schema::DataPiece>::Reader list);

}  // namespace atl
