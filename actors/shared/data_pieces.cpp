#include "actors/shared/data_pieces.hpp"

namespace atl {

void put_data_pieces(capnp::List<schema::DataPiece>::Builder list, const std::vector<data::piece>& pieces) {
  for (unsigned i = 0; i < pieces.size(); ++i) {
    list[i].setEpoch(pieces[i].chunk.epoch);
    list[i].setIndex(pieces[i].chunk.index);
    list[i].setBegin(pieces[i].positions.begin);
    list[i].setEnd(pieces[i].positions.end);
  }
}

std::vector<data::piece> read_data_pieces(capnp::List<schema::DataPiece>::Reader list) {
  std::vector<data::piece> out;
  out.reserve(list.size());
  for (auto p : list) out.push_back({{p.getEpoch(), p.getIndex()}, {p.getBegin(), p.getEnd()}});
  return out;
}

}  // namespace atl
