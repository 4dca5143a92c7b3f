#include "actors/keeper.hpp"

#include <chrono>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "runtime/actor_id.hpp"
#include "runtime/digest.hpp"
#include "runtime/fault_point.hpp"
#include "runtime/log.hpp"

namespace atl {

namespace {

using self_ptr = caf::stateful_actor<keeper_state>*;

void request_missing(self_ptr self) {
  auto& st = self->state;
  for (const auto f : st.missing) {
    wire::outgoing out;
    out.envelope.initLoadRequest().setFragment(f);
    st.mail->send(st.source, 0, out);
  }
}

// The source's latest state of a fragment: committed here unless this replica already has
// it or newer (commits from the coordinators arrive all along).
void on_catch_up(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto reply = msg->envelope().getLoadReply();
  if (msg->sender() != st.source) {
    st.mail->refuse(*msg, make_error(errc::unexpected_message, "load_reply from " + msg->sender()), msg->epoch());
    return;
  }
  if (!st.missing.count(reply.getFragment())) return;  // a duplicate answer: already caught up
  st.missing.erase(reply.getFragment());
  if (!reply.getFound() || msg->tensors().size() != 2) return;
  fragment_checkpoint cp{reply.getFragment(), reply.getRound(), msg->epoch(), msg->tensors()[0].to_floats(),
                         msg->tensors()[1].to_floats()};
  auto latest = st.store->latest(cp.fragment);
  if (latest && *latest && (*latest)->round >= cp.round) return;
  if (auto err = st.store->commit(cp))
    log_error("keeper: catching up fragment " + std::to_string(cp.fragment) + " failed: " + err.describe());
  else
    log_info("keeper: caught up fragment " + std::to_string(cp.fragment) + " at round " + std::to_string(cp.round) +
             " from " + st.source);
}

void raise_writer_epoch(self_ptr self, std::uint32_t fragment, std::uint64_t epoch) {
  auto& e = self->state.writer_epoch[fragment];
  e = std::max(e, epoch);
}

// S5 for commits: a CommitRequest from an epoch older than the coordinator that loaded from
// this keeper or committed to it since (a coordinator re-placed after its node died; the
// old one's messages may still arrive) is refused, unless it repeats the latest round with
// the same bytes. The stored epoch counts too, so a restarted keeper keeps the fence; it
// is read once per fragment, and the stored record only for a stale commit (the common
// commit reads no checkpoint).
status fence_commit(self_ptr self, const checkpoint_view& cp) {
  auto& st = self->state;
  if (st.epoch_loaded.insert(cp.fragment).second) {
    auto stored = st.store->latest(cp.fragment);
    if (!stored) {
      st.epoch_loaded.erase(cp.fragment);
      return stored.err();
    }
    if (*stored) raise_writer_epoch(self, cp.fragment, (*stored)->epoch);
  }
  const std::uint64_t floor = st.writer_epoch[cp.fragment];
  if (cp.epoch >= floor) return {};
  auto latest = st.store->latest(cp.fragment);
  if (!latest) return latest.err();
  if (*latest && (*latest)->round == cp.round && cp.same_values(**latest)) return {};
  return make_error(errc::stale_epoch, "commit of fragment " + std::to_string(cp.fragment) + " round " +
                                           std::to_string(cp.round) + " from epoch " + std::to_string(cp.epoch) +
                                           ": a coordinator of epoch " + std::to_string(floor) + " took over");
}

// A CommitRequest's theta and momentum, read in place from its two fp32 frames (which the
// message keeps alive while the keeper writes them).
expected<checkpoint_view> commit_values(const wire::message& msg) {
  const auto& t = msg.tensors();
  if (t.size() != 2) return make_error(errc::tensor_mismatch, "commit needs theta and momentum tensors");
  if (t[0].dtype != schema::DType::FLOAT32 || t[1].dtype != schema::DType::FLOAT32)
    return make_error(errc::tensor_mismatch, "commit tensors must be fp32");
  if (t[0].data.size() != t[1].data.size()) return make_error(errc::tensor_mismatch, "theta and momentum sizes differ");
  checkpoint_view v;
  v.theta = reinterpret_cast<const float*>(t[0].data.data());
  v.momentum = reinterpret_cast<const float*>(t[1].data.data());
  v.count = t[0].data.size() / sizeof(float);
  v.theta_digest = t[0].checksum;  // decode checked the frame against it
  return v;
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

caf::behavior keeper_behavior(self_ptr self) {
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        const auto env = msg->envelope();
        if (env.isLoadReply() && !st.source.empty()) {
          on_catch_up(self, msg);
        } else if (env.isChunkRequest()) {
          on_chunk_request(self, msg);
        } else if (env.isRefusal()) {
          // Never answered: two actors refusing each other's refusals would never stop.
          log_warn("keeper: refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
        } else if (env.isCommitRequest()) {
          const auto req = env.getCommitRequest();
          wire::outgoing out;
          auto ack = out.envelope.initCommitAck();
          ack.setFragment(req.getFragment());
          ack.setRound(req.getRound());
          auto values = commit_values(*msg);
          if (!values) {
            ack.setOk(false);
            ack.setError(values.err().describe());
          } else {
            // The request is in: the coordinator may send the round's early results now,
            // while this keeper writes (they no longer compete with the commit's bytes).
            wire::outgoing notice;
            auto w = notice.envelope.initCommitAck();
            w.setFragment(req.getFragment());
            w.setRound(req.getRound());
            w.setWriting(true);
            st.mail->send(msg->sender(), msg->epoch(), notice);
            checkpoint_view cp = *values;
            cp.fragment = req.getFragment();
            cp.round = req.getRound();
            cp.epoch = msg->epoch();
            const auto writing = std::chrono::steady_clock::now();
            auto result = fence_commit(self, cp);
            if (!result) result = st.store->commit_keeping_files(cp);
            // How long the write and fdatasync took: the averaging bench splits a commit's
            // time with it.
            log_debug(
                "keeper: wrote fragment " + std::to_string(cp.fragment) + " round " + std::to_string(cp.round) + " (" +
                std::to_string(2 * cp.count * sizeof(float) >> 20) + " MiB) in " +
                std::to_string(std::chrono::duration<double>(std::chrono::steady_clock::now() - writing).count()) +
                " s");
            if (!result) raise_writer_epoch(self, cp.fragment, cp.epoch);
            // A committed round is the fragment's newest: a replica need not catch it up any
            // more (and stops asking a source that may have died since it was placed).
            if (!result) st.missing.erase(cp.fragment);
            if (!result && cp.round > 0) ATL_FAULT_POINT("keeper.written");
            ack.setOk(!result);
            ack.setError(result.describe());
            ack.setDigest(cp.digest_of_theta());
            if (result)
              log_error("keeper: commit of fragment " + std::to_string(cp.fragment) + " round " +
                        std::to_string(cp.round) + " failed: " + result.describe());
          }
          st.mail->send(msg->sender(), msg->epoch(), out);
          st.store->remove_unnamed_files();  // after the ack: the coordinator need not wait for it
        } else if (env.isLoadRequest()) {
          const auto fragment = env.getLoadRequest().getFragment();
          // A coordinator starting in this epoch: commits from older ones are refused now.
          if (is_kind(msg->sender(), actor_kind::coordinator)) raise_writer_epoch(self, fragment, msg->epoch());
          auto cp = st.store->latest(fragment);
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
          }
          st.mail->send(msg->sender(), msg->epoch(), out);
        } else {
          st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), msg->epoch());
        }
      },
      [=](tick_atom) {  // a replica asks again until every fragment is answered
        if (self->state.missing.empty()) return;
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
  return keeper_behavior(self);
}

caf::behavior keeper_replica_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                                   std::string cluster_id, std::shared_ptr<keeper_storage> storage, std::string source,
                                   std::uint32_t fragments) {
  auto& st = self->state;
  st.mail = std::make_unique<mailer>(*net, id, cluster_id);
  st.owned = std::move(storage);
  st.store = st.owned->checkpoints.get();
  st.source = std::move(source);
  for (std::uint32_t f = 0; f < fragments; ++f) st.missing.insert(f);
  request_missing(self);
  self->delayed_send(self, std::chrono::seconds(1), tick_atom::value);
  return keeper_behavior(self);
}

}  // namespace atl
