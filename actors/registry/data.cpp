// The run's data cursor at the head (actors/decisions/data_cursor.hpp; docs/design.md §1,
// "Every sample once"). The registry feeds it what it hears: a worker's DataLeaseRequest
// (answered with a DataLease), its DataTie beside a contribution, each RoundReport (the
// contributors its commit took), and a node's end (its workers tie nothing more). After
// each change the cursor is saved with the registry's snapshot, in its stored form
// (actors/shared/cursor_record.hpp), before anyone hears of the change.
#include "actors/registry/internal.hpp"
#include "actors/shared/cursor_record.hpp"
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

void on_data_tie(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  auto* w = sending_worker(self, *msg);
  if (!w) return;
  if (!st.data) {
    return st.mail->refuse(*msg, make_error(errc::not_ready, "the run has leased no data"), st.snap.epoch);
  }
  const auto tie = msg->envelope().getDataTie();
  // Every piece or none: a refused piece leaves the cursor as it was before the message.
  auto before = st.data->snapshot();
  for (auto p : tie.getPieces()) {
    if (auto err = st.data->tie(w->id, tie.getFragment(), tie.getRound(), {p.getEpoch(), p.getIndex()},
                                {p.getBegin(), p.getEnd()})) {
      auto restored = data::data_cursor::restore(before);
      if (restored) st.data = std::move(*restored);
      return st.mail->refuse(*msg, err, st.snap.epoch);
    }
  }
  save_cursor(self);
}

void data_committed(self_ptr self, std::uint32_t fragment, std::uint64_t round, const std::vector<std::string>& taken,
                    const std::vector<std::string>& late) {
  auto& st = self->state;
  if (!st.data) return;
  st.data->committed(fragment, round, taken, late);
  save_cursor(self);
}

void data_workers_gone(self_ptr self, const std::vector<std::string>& workers) {
  auto& st = self->state;
  if (!st.data || workers.empty()) return;
  for (const auto& w : workers) st.data->worker_gone(w);
  save_cursor(self);
}

}  // namespace atl::registry_detail
