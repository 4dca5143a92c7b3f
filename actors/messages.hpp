#pragma once
// In-process messages between actors of one process (never on the wire). Wire payloads
// are Cap'n Proto (schema/envelope.capnp) and arrive as wire::message_ptr.
#include <cstdint>
#include <string>
#include <vector>

#include <caf/allowed_unsafe_message_type.hpp>
#include <caf/atom.hpp>

namespace atl {

using tick_atom = caf::atom_constant<caf::atom("tick")>;          // periodic timer
using step_atom = caf::atom_constant<caf::atom("step")>;          // worker: run one inner step
using stop_atom = caf::atom_constant<caf::atom("stop")>;          // finish and quit
using restart_atom = caf::atom_constant<caf::atom("restart")>;    // node agent: respawn a worker

// registry -> coordinators: the workers of the current epoch.
struct membership_update {
  std::uint64_t epoch = 0;
  std::vector<std::string> workers;  // sorted
};

// coordinator -> registry: a round was committed and released.
struct round_report {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  std::uint64_t digest = 0;  // theta_global after the round
  std::vector<std::string> participants;
  double duration_s = 0;     // first contribution to release
  std::uint64_t bytes_in = 0;
};

// coordinator -> registry: a worker applied a round and reported its digest.
struct digest_report {
  std::uint32_t fragment = 0;
  std::string worker;
  std::uint64_t round = 0;
  std::uint64_t digest = 0;
};

}  // namespace atl

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(atl::membership_update)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(atl::round_report)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(atl::digest_report)
