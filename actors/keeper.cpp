#include "actors/keeper.hpp"

#include <caf/all.hpp>

#include "runtime/digest.hpp"
#include "runtime/fault_point.hpp"
#include "runtime/log.hpp"

namespace atl {

caf::behavior keeper_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                           std::string cluster_id, checkpoint_store* store) {
  self->state.mail = std::make_unique<mailer>(*net, id, cluster_id);
  self->state.store = store;
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        const auto env = msg->envelope();
        if (env.isCommitRequest()) {
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
  };
}

}  // namespace atl
