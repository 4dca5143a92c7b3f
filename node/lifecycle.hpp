#pragma once
// How a head or node process lives: its link security, its actor system, its stop signals,
// and a warning about a slow BLAS.
#include <functional>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

#include "runtime/core/expected.hpp"
#include "runtime/transport/security.hpp"

namespace atl {

// The link security of `atoll up` (server) or `atoll join` (client): keys from
// `keys_dir`, or plain TCP, which needs `insecure` unless `endpoint` is loopback (then it
// warns). Errors name the flag to fix.
enum class link_side { server, client };
expected<link_security> resolve_link_security(link_side side, const std::string& endpoint, const std::string& keys_dir,
                                              const std::string& client_key, bool insecure, const char* command);

// Warns on stderr when LibTorch runs on Debian's reference BLAS (about 50x slower).
void warn_if_reference_blas();

// Installs SIGINT/SIGTERM handlers that set a flag; returns the flag.
const volatile bool& install_stop_signals();

// The actor system of a head or node process: two scheduler threads (each worker trains
// on its own detached thread) that nap between polls for work only briefly
// (`moderate_poll_attempts` naps of 50 us after their spins: none) before they sleep until
// a message comes.
constexpr int moderate_poll_attempts = 0;
void configure_actor_system(caf::actor_system_config& cfg);

// Blocks until `root` terminates, sending it stop_atom once on SIGINT/SIGTERM.
// Returns the actor's exit reason.
caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root);
// The same, asking the root to stop once stop_requested() is true (polled every 200 ms).
caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root, const std::function<bool()>& stop_requested);

}  // namespace atl
