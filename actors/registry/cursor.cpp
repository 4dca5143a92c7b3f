// The run's data cursor applied (actors/registry/cursor.hpp).
#include "actors/registry/cursor.hpp"

#include "actors/shared/cursor_record.hpp"
#include "actors/shared/data_pieces.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {

void restore_data_cursor(self_ptr self) {
  auto& st = self->state;
  if (st.snap.data_cursor.empty()) return;  // no worker leased data before the restart
  auto snap = decode_cursor_parts(st.snap.data_cursor, st.snap.data_cursor_parts);
  auto cursor = snap ? data::data_cursor::restore(*snap) : expected<data::data_cursor>(snap.err());
  if (!cursor) {
    // The run's record of which data its model learned is damaged: leasing from a fresh
    // cursor would teach units twice, so none is leased (workers are refused, saying why).
    log_error("registry: the data cursor in the store does not load: " + cursor.err().describe());
    st.data_damaged = cursor.err();
    return;
  }
  st.data = std::move(*cursor);
}

bool save_cursor(self_ptr self) {
  auto& st = self->state;
  // In parts, made again only where chunks changed: the save writes the header and the
  // buckets this change touched, and costs what changed, not the run's history.
  cursor_parts parts{std::move(st.snap.data_cursor), std::move(st.snap.data_cursor_parts)};
  update_cursor_parts(*st.data, st.data->take_changed(), parts);
  st.snap.data_cursor = std::move(parts.header);
  st.snap.data_cursor_parts = std::move(parts.buckets);
  return persist(self);
}

status tie_pieces(self_ptr self, const std::string& worker, std::uint32_t fragment, std::uint64_t round,
                  capnp::List<schema::DataPiece>::Reader pieces) {
  return self->state.data->tie_all(worker, fragment, round, read_data_pieces(pieces));
}

bool data_committed(self_ptr self, const wire::message& msg, const std::vector<std::string>& taken,
                    const std::vector<std::string>& late) {
  auto& st = self->state;
  const auto report = msg.envelope().getRoundReport();
  const auto fragment = report.getFragment();
  if (!st.data) {
    if (report.getTies().size() > 0)  // leases come before ties: a cursor record that did not load
      log_error("registry: round " + std::to_string(report.getRound()) + " of unit " + std::to_string(fragment) +
                " took data pieces, but the run has no data cursor; they are not recorded");
    return true;
  }
  const auto applied = st.data->last_committed(fragment);
  // Sent again: its ties and commit are in (saved now if the first save failed).
  if (applied && *applied >= report.getRound()) return save_cursor(self);
  for (auto t : report.getTies()) {
    // A piece the cursor refuses is logged, not fatal to the report: the commit stands, and
    // the cursor keeps those positions as it had them (never learned twice).
    if (auto err = tie_pieces(self, t.getWorker().cStr(), fragment, t.getRound(), t.getPieces()))
      log_error("registry: round " + std::to_string(report.getRound()) + " of unit " + std::to_string(fragment) +
                ": the data of " + t.getWorker().cStr() + " is not recorded: " + err.describe());
  }
  st.data->committed(fragment, report.getRound(), report.getEpoch(), taken, late);
  return save_cursor(self);
}

void data_run_finished(self_ptr self) {
  auto& st = self->state;
  if (!st.data) return;
  st.data->run_finished();
  save_cursor(self);
}

void data_workers_gone(self_ptr self, const std::vector<std::string>& workers) {
  auto& st = self->state;
  if (!st.data || workers.empty()) return;
  // Out of the membership from the next epoch on: every change that ends a node moves the
  // epoch right after (after_membership_change), and rounds opened from then on are
  // without them.
  for (const auto& w : workers) st.data->worker_gone(w, st.snap.epoch + 1);
  if (st.phase == run_phase::finished) st.data->run_finished();  // no commit is to come: nothing to wait for
  save_cursor(self);
}

}  // namespace atl::registry_detail
