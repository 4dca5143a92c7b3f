#include "actors/keeper.hpp"

#include <caf/all.hpp>

#include "actors/messages.hpp"
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
  if (msg->sender() != st.source || !st.missing.count(reply.getFragment())) {
    st.mail->refuse(*msg, make_error(errc::unexpected_message, "load_reply from " + msg->sender()), msg->epoch());
    return;
  }
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

caf::behavior keeper_behavior(self_ptr self) {
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        const auto env = msg->envelope();
        if (env.isLoadReply() && !st.source.empty()) {
          on_catch_up(self, msg);
        } else if (env.isCommitRequest()) {
          const auto req = env.getCommitRequest();
          wire::outgoing out;
          auto ack = out.envelope.initCommitAck();
          ack.setFragment(req.getFragment());
          ack.setRound(req.getRound());
          if (msg->tensors().size() != 2) {
            ack.setOk(false);
            ack.setError("commit needs theta and momentum tensors");
          } else {
            fragment_checkpoint cp{req.getFragment(), req.getRound(), msg->epoch(), msg->tensors()[0].to_floats(),
                                   msg->tensors()[1].to_floats()};
            auto result = st.store->commit(cp);
            if (!result && cp.round > 0) ATL_FAULT_POINT("keeper.written");
            ack.setOk(!result);
            ack.setError(result.describe());
            ack.setDigest(digest64(cp.theta.data(), cp.theta.size() * sizeof(float)));
            if (result) log_error("keeper: commit of fragment " + std::to_string(cp.fragment) + " round " +
                                  std::to_string(cp.round) + " failed: " + result.describe());
          }
          st.mail->send(msg->sender(), msg->epoch(), out);
        } else if (env.isLoadRequest()) {
          const auto fragment = env.getLoadRequest().getFragment();
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
                                   std::string cluster_id, std::shared_ptr<keeper_storage> storage,
                                   std::string source, std::uint32_t fragments) {
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
