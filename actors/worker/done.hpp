#pragma once
// A worker's final report (WorkerDone): sent by the worker when it finishes, and kept by
// its node agent, which sends it again when the link to the head comes back. The worker
// has quit by then, and a head that took over (or restarted) may never have heard it:
// without it, no head would count the worker finished and the run would never end.
#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>

#include "runtime/transport/transport.hpp"

namespace atl {

struct worker_done_report {
  std::uint64_t steps = 0;
  float final_loss = 0;
  float val_loss = -1;  // -1: not evaluated
  float tokens_per_sec = 0;
  float wall_seconds = 0;
  float wait_seconds = 0;
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  struct fragment_ack {
    std::uint32_t fragment = 0;
    std::uint64_t round = 0, digest = 0;
    bool adopted = false;
  };
  std::vector<fragment_ack> last_acks;  // the last RoundAck of each fragment
};

void send_worker_done(mailer& mail, const std::string& registry, std::uint64_t epoch, const worker_done_report& report);

}  // namespace atl

// Passed from a worker to its node agent in one process, never on the wire.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(atl::worker_done_report)
