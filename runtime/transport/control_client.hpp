#pragma once
// A request/reply client of the head's control protocol (ControlRequest/ControlReply
// envelopes over a DEALER socket), used by atollctl and by `atoll local` and `atoll down`.
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"
#include "runtime/transport/security.hpp"

namespace atl {

struct control_reply {
  bool ok = false;
  std::string json;
  std::vector<std::uint8_t> data;  // the reply's first tensor, as bytes (a model chunk); usually none
};

// Sends `command` to the registry at `head` and waits up to `timeout` for the reply.
// errc::timeout when the head does not answer (also when the CURVE handshake fails:
// ZeroMQ retries it silently, so a wrong key looks like a silent head).
expected<control_reply> control_request(const std::string& head, const std::string& command,
                                        const std::string& argument, std::chrono::milliseconds timeout,
                                        const link_security& security = {});

}  // namespace atl
