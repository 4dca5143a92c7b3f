#include "runtime/transport/control_client.hpp"

#include <unistd.h>
#include <random>

#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "runtime/core/actor_id.hpp"
#include "runtime/transport/head_endpoints.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

expected<control_reply> control_request(const std::string& head, const std::string& command,
                                        const std::string& argument, std::chrono::milliseconds timeout,
                                        const link_security& security) {
  try {
    zmq::context_t ctx(1);
    zmq::socket_t sock(ctx, zmq::socket_type::dealer);
    // The request must leave even if no reply comes: closing waits up to this long for it.
    sock.set(zmq::sockopt::linger, 200);
    // With several heads the request waits for a connection to the leader: not for ever.
    sock.set(zmq::sockopt::sndtimeo, static_cast<int>(timeout.count()));
    apply_client_security(sock, security);
    connect_to_heads(sock, head);
    std::random_device rd;
    wire::outgoing out;
    out.envelope.setSender(control_id(std::to_string(::getpid()) + "-" + std::to_string(rd())));
    out.envelope.setReceiver("registry");
    out.envelope.setSeq(1);
    auto req = out.envelope.initControlRequest();
    req.setCommand(command);
    req.setArgument(argument);
    auto frames = wire::encode(out);
    for (std::size_t i = 0; i < frames.size(); ++i)
      if (!sock.send(zmq::const_buffer(frames[i].data(), frames[i].size()),
                     i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none))
        return make_error(errc::timeout,
                          "no head listening at " + head + " within " + std::to_string(timeout.count()) + " ms");
    zmq::pollitem_t item{static_cast<void*>(sock), 0, ZMQ_POLLIN, 0};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0)
        return make_error(errc::timeout, "no answer from " + head + " within " + std::to_string(timeout.count()) +
                                             " ms" + (security.enabled() ? " (are these the cluster's keys?)" : ""));
      zmq::poll(&item, 1, left);
      if (!(item.revents & ZMQ_POLLIN)) continue;
      std::vector<zmq::message_t> parts;
      (void)zmq::recv_multipart(sock, std::back_inserter(parts));
      wire::frames in;
      for (auto& p : parts) {
        const auto* b = static_cast<const std::uint8_t*>(p.data());
        in.emplace_back(b, b + p.size());
      }
      auto msg = wire::decode(std::move(in), wire::limits{});
      if (!msg) return msg.err();
      const auto env = (*msg)->envelope();
      if (env.isRefusal())
        return make_error(static_cast<errc>(env.getRefusal().getCode()), env.getRefusal().getMessage().cStr());
      if (!env.isControlReply()) continue;
      control_reply reply{env.getControlReply().getOk(), env.getControlReply().getJson().cStr(), {}};
      if (!(*msg)->tensors().empty()) reply.data = (*msg)->tensors().front().data.to_vector();
      return reply;
    }
  } catch (const zmq::error_t& e) {
    return make_error(errc::unknown_peer, std::string("cannot reach ") + head + ": " + e.what());
  }
}

}  // namespace atl
