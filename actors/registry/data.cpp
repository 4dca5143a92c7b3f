// The run's data cursor at the head (actors/decisions/data_cursor.hpp; docs/design.md §1,
// "Every sample once"). The registry feeds it what it hears: a worker's DataLeaseRequest
// (answered with a DataLease), its DataTie beside a contribution, each RoundReport (the
// contributors its commit took), and a node's end (its workers tie nothing more). After
// each change the cursor is saved with the registry's snapshot, in its stored form
// (actors/shared/cursor_record.hpp), before anyone hears of the change.
#include "actors/registry/internal.hpp"
#include "actors/shared/cursor_record.hpp"
#include "actors/shared/data_pieces.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

// Into the snapshot, then synced: a lease is durable before the worker hears of it. False
// when the store refused it.
bool save_cursor(self_ptr self) {
  auto& st = self->state;
  st.snap.data_cursor = encode_cursor(st.data->snapshot());
  return persist(self);
}

// The registered worker that sent `msg`, or a refusal (unknown_peer) and nullptr.
worker_view* sending_worker(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  auto it = st.workers.find(msg.sender());
  if (it != st.workers.end()) return &it->second;
  st.mail->refuse(msg, make_error(errc::unknown_peer, msg.sender() + " is not a registered worker"), st.snap.epoch);
  return nullptr;
}

}  // namespace

void restore_data_cursor(self_ptr self) {
  auto& st = self->state;
  if (st.snap.data_cursor.empty()) return;  // no worker leased data before the restart
  auto snap = decode_cursor(st.snap.data_cursor);
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

void on_data_lease_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  auto* w = sending_worker(self, *msg);
  if (!w) return;
  if (st.data_damaged) return st.mail->refuse(*msg, *st.data_damaged, st.snap.epoch);
  const auto req = msg->envelope().getDataLeaseRequest();
  if (!st.data) {  // the first lease of the run sets its data
    auto made = data::data_cursor::make({req.getUnits(), req.getChunk(), static_cast<std::uint32_t>(sync_units(st.cfg)),
                                         static_cast<std::uint64_t>(st.cfg.data_epochs)});
    if (!made) return st.mail->refuse(*msg, made.err(), st.snap.epoch);
    st.data = std::move(*made);
    log_info("registry: the run's data: " + std::to_string(req.getUnits()) + " units, leased " +
             std::to_string(req.getChunk()) + " at a time");
  }
  const auto& run = st.data->config();
  if (req.getUnits() != run.units || req.getChunk() != run.chunk)
    return st.mail->refuse(
        *msg,
        make_error(errc::invalid_config, w->id + " sees " + std::to_string(req.getUnits()) + " units in chunks of " +
                                             std::to_string(req.getChunk()) + "; the run's data has " +
                                             std::to_string(run.units) + " in chunks of " + std::to_string(run.chunk)),
        st.snap.epoch);
  const auto chunk = st.data->lease(w->id);
  // A lease the store did not keep is not handed out: a restarted head would lease the
  // chunk again. It stays with the worker here until the worker is gone (then returned).
  if (chunk && !save_cursor(self))
    return st.mail->refuse(*msg, make_error(errc::storage_failure, "the lease could not be saved; ask again"),
                           st.snap.epoch);
  wire::outgoing out;
  auto lease = out.envelope.initDataLease();
  lease.setSeed(static_cast<std::uint64_t>(st.cfg.seed));
  lease.setDone(!chunk);
  if (chunk) {
    const auto positions = st.data->positions_of(*chunk);
    lease.setEpoch(chunk->epoch);
    lease.setIndex(chunk->index);
    lease.setBegin(positions.begin);
    lease.setEnd(positions.end);
  }
  st.mail->send(w->id, st.snap.epoch, out);
}

namespace {

// Every piece of a worker's contribution to (fragment, round), or none: a refused piece
// leaves the cursor as it was before the first.
status tie_pieces(self_ptr self, const std::string& worker, std::uint32_t fragment, std::uint64_t round,
                  capnp::List<schema::DataPiece>::Reader pieces) {
  auto& st = self->state;
  auto before = st.data->snapshot();
  for (const auto& p : read_data_pieces(pieces)) {
    if (auto err = st.data->tie(worker, fragment, round, p.chunk, p.positions)) {
      auto restored = data::data_cursor::restore(before);
      if (restored) st.data = std::move(*restored);
      return err;
    }
  }
  return {};
}

}  // namespace

void on_data_tie(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  auto* w = sending_worker(self, *msg);
  if (!w) return;
  if (!st.data) {
    return st.mail->refuse(*msg, make_error(errc::not_ready, "the run has leased no data"), st.snap.epoch);
  }
  const auto tie = msg->envelope().getDataTie();
  if (auto err = tie_pieces(self, w->id, tie.getFragment(), tie.getRound(), tie.getPieces()))
    return st.mail->refuse(*msg, err, st.snap.epoch);
  save_cursor(self);
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
