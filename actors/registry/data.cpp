// The data messages of workers (actors/registry/data.hpp): a DataLeaseRequest answered with
// a DataLease, a DataTie beside a contribution; the cursor changes in cursor.cpp.
#include "actors/registry/data.hpp"

#include "actors/registry/cursor.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

// The registered worker that sent `msg`, or a refusal (unknown_peer) and nullptr.
worker_view* sending_worker(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  auto it = st.workers.find(msg.sender());
  if (it != st.workers.end()) return &it->second;
  st.mail->refuse(msg, make_error(errc::unknown_peer, msg.sender() + " is not a registered worker"), st.snap.epoch);
  return nullptr;
}

}  // namespace

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
  if (auto err = tie_pieces(self, w->id, tie.getFragment(), tie.getRound(), tie.getPieces()))
    return st.mail->refuse(*msg, err, st.snap.epoch);
  save_cursor(self);
}

}  // namespace atl::registry_detail
