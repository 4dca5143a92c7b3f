// The worker's side of the run's data cursor (run.data_cursor; docs/design.md, "Every
// sample once"): leases asked of the registry and kept in a data_feed
// (actors/worker/data_feed.hpp), each step's units handed to the replica before it trains,
// and in each contribution the positions it covers (the coordinator reports them with the
// round that takes it). A step whose units have not come blocks the worker like a result
// that has not.
#include "actors/worker/data.hpp"

#include <caf/all.hpp>

#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace {

void ask_lease(worker_self self) {
  auto& st = self->state;
  wire::outgoing out;
  auto r = out.envelope.initDataLeaseRequest();
  r.setUnits(st.data->units());
  r.setChunk(st.data->chunk());
  st.mail->send(registry_id(), st.epoch, out);
  st.data->set_asked(true);
}

}  // namespace

void start_data_feed(worker_self self) {
  auto& st = self->state;
  if (!st.cfg.run.data_cursor) return;
  // On by default: the tasks it does not apply to sample as they always did, said at debug.
  if (st.cfg.run.mode == "ddp") {
    log_debug(st.cfg.id + ": run.data_cursor: not with run.mode = ddp (every step is a round); sampling the shard");
    return;
  }
  const auto units = st.model->data_units();
  const auto per_step = st.model->units_per_step();
  if (units == 0 || per_step == 0) {
    log_debug(st.cfg.id + ": run.data_cursor: this task samples its own data (only token tasks lease units)");
    return;
  }
  // A chunk is what one worker trains between two syncs of a fragment: H steps.
  const auto chunk = static_cast<std::uint64_t>(st.cfg.run.sync_every) * per_step;
  st.data.emplace(units, chunk, per_step, st.fragments.size());
  ask_lease(self);
}

bool feed_next_step(worker_self self) {
  auto& st = self->state;
  if (!st.data) return true;
  auto units = st.data->take_step(st.step);
  if (st.data->wants_lease()) ask_lease(self);  // the next chunk on its way before it is needed
  if (!units) return false;
  st.model->queue_units(*units);
  return true;
}

std::vector<data::piece> contribution_pieces(worker_self self, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  if (!st.data) return {};
  auto pieces = st.data->contribution(f, st.step);
  // The worker's own record of what each contribution trained on (ATOLL_LOG=debug): a
  // test checks the head's ledger against it.
  std::string text;
  for (const auto& p : pieces)
    text += " " + std::to_string(p.chunk.epoch) + ":" + std::to_string(p.chunk.index) + ":" +
            std::to_string(p.positions.begin) + "-" + std::to_string(p.positions.end);
  log_debug(st.cfg.id + ": data of unit " + std::to_string(f) + " round " + std::to_string(round) + ":" + text);
  return pieces;
}

void on_data_lease(worker_self self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (!st.data || msg->sender() != registry_id()) {
    st.mail->refuse(*msg, make_error(errc::unexpected_message, "no lease asked for"), st.epoch);
    return;
  }
  const auto lease = msg->envelope().getDataLease();
  if (lease.getDone()) {
    st.data->set_asked(false);
    st.data->run_out();
  } else if (st.data->leased({lease.getEpoch(), lease.getIndex()}, {lease.getBegin(), lease.getEnd()},
                             lease.getSeed())) {
    st.data->set_asked(false);
  } else {
    log_warn(st.cfg.id + ": chunk " + std::to_string(lease.getIndex()) + " of epoch " +
             std::to_string(lease.getEpoch()) + " leased again; it was trained once already, so it is left alone");
    return;  // a request of ours may still be unanswered
  }
  unblock(self);  // a step that waited for units tries again
}

void data_refused(worker_self self, errc code, const std::string& why) {
  auto& st = self->state;
  if (!st.data) return;
  st.data->set_asked(false);
  if (code != errc::invalid_config) return;
  log_error(st.cfg.id + ": the run's data cursor refuses this worker's data: " + why);
  self->quit(caf::make_error(caf::sec::runtime_error));
}

void data_tick(worker_self self) {
  auto& st = self->state;
  if (!st.data) return;
  // A lease asked for while the steps wait on it may have been lost with a dropped link or a
  // restarting head: asked again (the lost one, if it was granted, returns once this
  // worker is gone). A worker blocked on a round result with units in hand asks nothing.
  const bool waiting_for_units = st.data->asked() && st.data->starved() && st.current == worker_state::phase::blocked;
  if (st.data->wants_lease() || waiting_for_units) ask_lease(self);
}

bool data_exhausted(const worker_state& st) { return st.data && st.data->exhausted(); }

}  // namespace atl
