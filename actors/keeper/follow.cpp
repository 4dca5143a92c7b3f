// The keeper's copies of the fragments (actors/keeper/follow.hpp): records applied after
// their acknowledgement, and snapshots written by a detached writer.
#include "actors/keeper/follow.hpp"

#include <caf/all.hpp>

#include "actors/keeper/keeper_messages.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl::keeper_detail {

// The written snapshot named in the store (or let go, said why).
void finish_snapshot(self_ptr self) {
  auto& st = self->state;
  auto job = std::move(st.snapshot_writing);
  if (!job) return;
  const auto where = "fragment " + std::to_string(job->fragment()) + " round " + std::to_string(job->round());
  const double seconds = st.machine.finish_snapshot(st.now());
  if (auto err = st.store->end_snapshot(*job))
    log_error("keeper: snapshot of " + where + " failed (the log still holds it): " + err.describe());
  else
    log_debug("keeper: snapshot of " + where + " in " + std::to_string(seconds) + " s, written beside the round log");
  st.store->remove_unnamed_files();
}

namespace {

// A snapshot of the followed state of `fragment` (keeper.hpp: by a detached writer).
void start_snapshot(self_ptr self, std::uint32_t fragment, std::uint64_t theta_digest) {
  auto& st = self->state;
  const auto& f = st.followed.at(fragment);
  const auto where = "fragment " + std::to_string(fragment) + " round " + std::to_string(f.round);
  if (!st.machine.start_snapshot(st.now())) {
    log_debug("keeper: snapshot of " + where + " skipped: the one of fragment " +
              std::to_string(st.snapshot_writing->fragment()) + " round " +
              std::to_string(st.snapshot_writing->round()) + " is still being written");
    return;
  }
  ATL_FAULT_POINT("keeper.snapshotting");
  auto job = st.store->begin_snapshot({fragment, f.round, f.epoch, f.state.theta, f.state.momentum, f.state.residual},
                                      theta_digest);
  if (!job) {
    st.machine.finish_snapshot(st.now());
    log_error("keeper: snapshot of " + where + " refused (the log still holds it): " + job.err().describe());
    return;
  }
  st.snapshot_writing = *job;
  if (!st.store->writes_files()) {
    st.snapshot_writing->write();
    finish_snapshot(self);
    return;
  }
  self->spawn<caf::detached>([job = *job, keeper = caf::actor_cast<caf::actor>(self)](caf::event_based_actor* writer) {
    job->write();
    writer->send(keeper, snapshot_atom::value);
  });
}

// After a record's ack: this keeper's copy of the fragment's state moves to its round, by
// the coordinator's own step, or is read anew from the store (snapshot plus log) when the
// copy is not the round before. A snapshot follows every storage.snapshot_every rounds.
void follow_record(self_ptr self, const wire::message& msg, const round_record& record) {
  auto& st = self->state;
  const auto fragment = record.fragment;
  const auto where = "fragment " + std::to_string(fragment) + " round " + std::to_string(record.round);
  auto it = st.followed.find(fragment);
  status result;
  if (it != st.followed.end() && it->second.round + 1 == record.round) {
    result = apply_record(record, it->second.state, st.scratch);
    it->second.round = record.round;
    it->second.epoch = record.epoch;
  } else {
    auto loaded = st.store->load(fragment, record.round);
    if (!loaded) result = loaded.err();
    else if (!*loaded) result = make_error(errc::storage_failure, where + " is not in the store it was appended to");
    else
      st.followed[fragment] = {
          record.round,
          record.epoch,
          {std::move((*loaded)->theta), std::move((*loaded)->momentum), std::move((*loaded)->residual)}};
  }
  if (result) {
    st.followed.erase(fragment);
    if (result.code == errc::digest_mismatch) st.store->note_replay_mismatch();
    log_error("keeper: " + where + " does not replay: " + result.describe());
    st.mail->refuse(msg, result, msg.epoch());
    return;
  }
  if (st.store->snapshot_due(record.round)) start_snapshot(self, fragment, record.theta_digest);
}

}  // namespace

// Applies the records acknowledged so far, in order (`timer`: the follow timer fired).
void follow_pending(self_ptr self, bool timer) {
  auto& st = self->state;
  st.machine.take_pending(timer);
  auto pending = std::move(st.to_follow);
  st.to_follow.clear();
  for (const auto& [msg, record] : pending) follow_record(self, *msg, record);
}

}  // namespace atl::keeper_detail
