#include "actors/keeper/keeper.hpp"

#include <algorithm>
#include <chrono>

#include <caf/all.hpp>

#include "actors/keeper/follow.hpp"
#include "actors/keeper/keeper_messages.hpp"
#include "actors/shared/commit_record.hpp"
#include "actors/shared/guarded_handler.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl {

namespace {

using keeper_detail::finish_snapshot;
using keeper_detail::follow_delay;
using keeper_detail::follow_pending;
using self_ptr = keeper_detail::self_ptr;

void request_missing(self_ptr self) {
  auto& st = self->state;
  for (const auto f : st.machine.missing()) {
    wire::outgoing out;
    out.envelope.initLoadRequest().setFragment(f);
    st.mail->send(st.machine.source(), 0, out);
  }
}

// The source's latest state of a fragment: committed here unless this replica already has
// it or newer (commits from the coordinators arrive all along).
void on_catch_up(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto reply = msg->envelope().getLoadReply();
  switch (st.machine.on_load_reply(msg->sender(), reply.getFragment())) {
    case keeper_machine::catch_up::refuse:
      st.mail->refuse(*msg, make_error(errc::unexpected_message, "load_reply from " + msg->sender()), msg->epoch());
      return;
    case keeper_machine::catch_up::ignore: return;  // a duplicate answer: already caught up
    case keeper_machine::catch_up::store_if_newer: break;
  }
  const auto& t = msg->tensors();
  if (!reply.getFound() || t.size() < 2 || t.size() > 3) return;
  fragment_checkpoint cp{reply.getFragment(), reply.getRound(),
                         msg->epoch(),        t[0].to_floats(),
                         t[1].to_floats(),    t.size() == 3 ? t[2].to_floats() : std::vector<float>{}};
  auto latest = st.store->latest_round(cp.fragment);
  if (latest && *latest && **latest >= cp.round) return;
  if (auto err = st.store->commit(cp)) {
    log_error("keeper: catching up fragment " + std::to_string(cp.fragment) + " failed: " + err.describe());
    return;
  }
  log_info("keeper: caught up fragment " + std::to_string(cp.fragment) + " at round " + std::to_string(cp.round) +
           " from " + st.machine.source());
  st.followed[cp.fragment] = {
      cp.round, cp.epoch, {std::move(cp.theta), std::move(cp.momentum), std::move(cp.residual)}};
}

// The store's newest round of `fragment`, with its epoch and theta digest: what the fence
// weighs a commit against (keeper_machine::fence). Reads no value file.
expected<std::optional<stored_round>> newest_stored(const checkpoint_store& store, std::uint32_t fragment) {
  auto round = store.latest_round(fragment);
  if (!round) return round.err();
  if (!*round) return std::optional<stored_round>{};
  auto summary = store.summary(fragment, **round);
  if (!summary) return summary.err();
  if (!*summary) return std::optional<stored_round>{};
  return std::optional<stored_round>{stored_round{(*summary)->round, (*summary)->epoch, (*summary)->digest}};
}

// S5 for commits (keeper_machine edge 7): a commit from an epoch older than a coordinator
// that loaded from this keeper or committed to it since is refused, unless it repeats the
// newest round with the same theta.
status fence_commit(self_ptr self, const commit_identity& cp) {
  auto stored = newest_stored(*self->state.store, cp.fragment);
  if (!stored) return stored.err();
  return self->state.machine.fence(cp, *stored);
}

// The notice that a commit's whole request is in: the coordinator may send the round's
// early results now, while this keeper writes (they no longer compete with its bytes).
void say_writing(self_ptr self, const wire::message& msg, std::uint32_t fragment, std::uint64_t round) {
  wire::outgoing notice;
  write_writing_notice(notice, fragment, round);
  self->state.mail->send(msg.sender(), msg.epoch(), notice);
}

void say_committed(self_ptr self, const wire::message& msg, std::uint32_t fragment, std::uint64_t round,
                   std::uint64_t digest, const status& result) {
  wire::outgoing out;
  write_commit_ack(out, fragment, round, digest, result);
  self->state.mail->send(msg.sender(), msg.epoch(), out);
}

// Round 0 (the seed) or a full state: a snapshot, synced, that becomes the followed state.
void on_full_commit(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto req = msg->envelope().getCommitRequest();
  auto values = commit_values(*msg);
  if (!values) {
    say_committed(self, *msg, req.getFragment(), req.getRound(), 0, values.err());
    return;
  }
  say_writing(self, *msg, req.getFragment(), req.getRound());
  checkpoint_view cp = *values;
  cp.fragment = req.getFragment();
  cp.round = req.getRound();
  cp.epoch = msg->epoch();
  const auto writing = st.now();
  auto result = fence_commit(self, {cp.fragment, cp.round, cp.epoch, cp.digest_of_theta()});
  if (!result) result = st.store->commit_keeping_files(cp);
  log_debug("keeper: wrote fragment " + std::to_string(cp.fragment) + " round " + std::to_string(cp.round) + " (" +
            std::to_string(msg->tensors().size() * cp.count * sizeof(float)) + " bytes of full state) in " +
            std::to_string(std::chrono::duration<double>(st.now() - writing).count()) + " s");
  if (!result) self->state.machine.committed(cp.fragment, cp.epoch);
  if (result)
    log_error("keeper: commit of fragment " + std::to_string(cp.fragment) + " round " + std::to_string(cp.round) +
              " failed: " + result.describe());
  say_committed(self, *msg, cp.fragment, cp.round, cp.digest_of_theta(), result);
  st.store->remove_unnamed_files();  // after the ack: the coordinator need not wait for it
  if (result) return;
  auto& f = st.followed[cp.fragment];
  f.round = cp.round;
  f.epoch = cp.epoch;
  f.state.theta.assign(cp.theta, cp.theta + cp.count);
  f.state.momentum.assign(cp.momentum, cp.momentum + cp.count);
  if (cp.residual) f.state.residual.assign(cp.residual, cp.residual + cp.count);
  else f.state.residual.clear();
}

// A round's record: appended to the log (durable as storage.sync says), acknowledged, then
// followed.
void on_logged_commit(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto req = msg->envelope().getCommitRequest();
  auto record = take_commit_record(*msg);
  if (!record) {
    say_committed(self, *msg, req.getFragment(), req.getRound(), 0, record.err());
    return;
  }
  say_writing(self, *msg, record->fragment, record->round);
  const commit_identity identity{record->fragment, record->round, record->epoch, record->theta_digest};
  const auto writing = st.now();
  auto result = fence_commit(self, identity);
  if (!result) result = st.store->append_keeping_files(*record);
  // How long the append took: the averaging bench splits a commit's time with it.
  log_debug("keeper: wrote fragment " + std::to_string(record->fragment) + " round " + std::to_string(record->round) +
            " (" + std::to_string(record->input_bytes()) + " bytes logged) in " +
            std::to_string(std::chrono::duration<double>(st.now() - writing).count()) + " s");
  if (!result) st.machine.committed(record->fragment, record->epoch);
  if (!result && record->round > 0) ATL_FAULT_POINT("keeper.written");
  if (result && result.code != errc::not_ready)
    log_error("keeper: commit of fragment " + std::to_string(record->fragment) + " round " +
              std::to_string(record->round) + " failed: " + result.describe());
  say_committed(self, *msg, record->fragment, record->round, record->theta_digest, result);
  st.store->remove_unnamed_files();
  if (result) return;
  const auto followed = st.followed.find(record->fragment);
  std::optional<keeper_machine::followed_at> at;
  if (followed != st.followed.end()) at = keeper_machine::followed_at{followed->second.round, followed->second.epoch};
  bool schedule = false;
  if (!st.machine.acknowledged(identity, at, schedule)) return;  // a retry of what it follows or will
  st.to_follow.emplace_back(msg, std::move(*record));
  if (schedule) self->delayed_send(self, follow_delay, follow_atom::value);
}

// The state a LoadRequest gets: the followed copy when it is the latest round, else the
// store's (snapshot plus log).
expected<std::optional<fragment_checkpoint>> latest_state(self_ptr self, std::uint32_t fragment) {
  auto& st = self->state;
  auto round = st.store->latest_round(fragment);
  if (!round) return round.err();
  auto it = st.followed.find(fragment);
  if (*round && it != st.followed.end() && it->second.round == **round) {
    const auto& f = it->second;
    return std::optional<fragment_checkpoint>{
        fragment_checkpoint{fragment, f.round, f.epoch, f.state.theta, f.state.momentum, f.state.residual}};
  }
  return st.store->latest(fragment);
}

// Values a ChunkReply carries at most (16 MiB), whatever the request asks.
constexpr std::uint64_t max_chunk_values = 1 << 22;

void on_chunk_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto req = msg->envelope().getChunkRequest();
  if (!st.served || st.served->fragment != req.getFragment() || st.served->round != req.getRound()) {
    st.served.reset();
    auto cp = st.store->load(req.getFragment(), req.getRound());
    if (cp && *cp) st.served = std::move(**cp);
  }
  wire::outgoing out;
  auto reply = out.envelope.initChunkReply();
  reply.setFragment(req.getFragment());
  reply.setRound(req.getRound());
  reply.setOffset(req.getOffset());
  const bool found = st.served && req.getOffset() < st.served->theta.size() && req.getCount() > 0;
  reply.setFound(found);
  if (found) {
    const auto n = std::min({req.getCount(), max_chunk_values, st.served->theta.size() - req.getOffset()});
    out.tensors.push_back(wire::tensor::from_floats(st.served->theta.data() + req.getOffset(), n));
  }
  st.mail->send(msg->sender(), msg->epoch(), out);
}

// The newest round held of each fragment, to the registry; only once caught up.
void report_ready(self_ptr self) {
  auto& st = self->state;
  if (!st.machine.can_report_ready()) return;
  const auto fragments = st.machine.fragments();
  wire::outgoing out;
  auto ready = out.envelope.initKeeperReady();
  auto rounds = ready.initRounds(fragments);
  auto held = ready.initHeld(fragments);
  for (std::uint32_t f = 0; f < fragments; ++f) {
    const auto latest = st.store->latest_round(f);
    if (!latest) return;  // a store that cannot say: asked again next tick
    held.set(f, latest->has_value());
    rounds.set(f, latest->value_or(0));
  }
  st.mail->send(registry_id(), 0, out);
}

caf::behavior keeper_behavior(self_ptr self) {
  return {
      [=](const wire::message_ptr& msg) {
        guarded(*self->state.mail, *msg, msg->epoch(), "keeper.handler", [&] {
          auto& st = self->state;
          const auto env = msg->envelope();
          // Anything but the next record reads or replaces the followed state: bring it up to date.
          if (!(env.isCommitRequest() && env.getCommitRequest().getLogged())) follow_pending(self);
          if (env.isLoadReply() && st.machine.is_replica()) {
            on_catch_up(self, msg);
          } else if (env.isChunkRequest()) {
            on_chunk_request(self, msg);
          } else if (env.isRefusal()) {
            // Never answered: two actors refusing each other's refusals would never stop.
            log_warn("keeper: refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
          } else if (env.isCommitRequest()) {
            if (env.getCommitRequest().getLogged()) on_logged_commit(self, msg);
            else on_full_commit(self, msg);
          } else if (env.isLoadRequest()) {
            const auto fragment = env.getLoadRequest().getFragment();
            // A coordinator starting in this epoch: commits from older ones are refused now.
            if (is_kind(msg->sender(), actor_kind::coordinator)) st.machine.coordinator_loading(fragment, msg->epoch());
            auto cp = latest_state(self, fragment);
            if (!cp) {
              st.mail->refuse(*msg, cp.err(), msg->epoch());
              return;
            }
            wire::outgoing out;
            auto reply = out.envelope.initLoadReply();
            reply.setFragment(fragment);
            reply.setFound(cp->has_value());
            if (*cp) {
              reply.setRound((*cp)->round);
              out.tensors.push_back(wire::tensor::from_floats((*cp)->theta.data(), (*cp)->theta.size()));
              out.tensors.push_back(wire::tensor::from_floats((*cp)->momentum.data(), (*cp)->momentum.size()));
              if (!(*cp)->residual.empty())
                out.tensors.push_back(wire::tensor::from_floats((*cp)->residual.data(), (*cp)->residual.size()));
            }
            st.mail->send(msg->sender(), msg->epoch(), out);
          } else {
            st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), msg->epoch());
          }
        });
      },
      [=](follow_atom) { follow_pending(self, true); },
      [=](ready_atom) { report_ready(self); },
      [=](snapshot_atom) { finish_snapshot(self); },
      [=](tick_atom) {  // a replica asks again until every fragment is answered
        if (self->state.machine.caught_up()) return;
        request_missing(self);
        self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
      },
  };
}

}  // namespace

caf::behavior keeper_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                           std::string cluster_id, checkpoint_store* store) {
  self->state.mail = std::make_unique<mailer>(*net, id, cluster_id);
  self->state.store = store;
  self->state.clock = &self->clock();
  return keeper_behavior(self);
}

caf::behavior keeper_replica_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                                   std::string cluster_id, std::shared_ptr<keeper_storage> storage, std::string source,
                                   std::uint32_t fragments, std::vector<std::uint32_t> kept) {
  auto& st = self->state;
  st.mail = std::make_unique<mailer>(*net, id, cluster_id);
  st.owned = std::move(storage);
  st.store = st.owned->checkpoints.get();
  st.clock = &self->clock();
  st.machine = keeper_machine(std::move(source), fragments, kept);
  request_missing(self);
  self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  return keeper_behavior(self);
}

}  // namespace atl
