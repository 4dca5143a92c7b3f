// How a process lives: it runs until its root actor terminates; SIGINT or SIGTERM asks
// that actor, once, to stop cleanly.
#include <csignal>

#include <caf/all.hpp>

#include "actors/shared/messages.hpp"
#include "node/lifecycle.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace {
volatile bool stop_requested = false;
void on_signal(int) { stop_requested = true; }
}  // namespace

const volatile bool& install_stop_signals() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return stop_requested;
}

void configure_actor_system(caf::actor_system_config& cfg) {
  cfg.set("scheduler.max-threads", 2);
  // CAF's work stealing polls for work after each message: 100 spins, then 500 naps of
  // 50 us (25 ms), before its threads wait on a condition variable that the next message
  // to arrive from outside notifies. A head that hears from hundreds of nodes a second never
  // got past the naps: at 300 simulated nodes half its CPU was spent in them (perf), and
  // beside training they cost a node about 5% of a core (./tools/dev bench step). Without
  // the naps the head at 1000 simulated nodes went from 0.17 to 0.11 of a core (ten naps:
  // 0.17; ./tools/dev bench scale); the spins still keep a burst on a hot thread. Work
  // sharing (threads always on the condition variable) was cheaper still, but with it two
  // process tests failed once each (the worker on the coordinator's node ended without the
  // last round's ack), so stealing stays.
  cfg.set("work-stealing.moderate-poll-attempts", moderate_poll_attempts);
}

caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root) {
  const auto& stop = install_stop_signals();
  return wait_for_actor(sys, root, [&stop] { return stop; });
}

caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root, const std::function<bool()>& stop) {
  caf::scoped_actor waiter{sys};
  waiter->monitor(root);
  bool down = false, stop_sent = false;
  caf::error reason;
  while (!down) {
    waiter->receive(
        [&](caf::down_msg& msg) {
          down = true;
          reason = msg.reason;
        },
        caf::after(std::chrono::milliseconds(200)) >>
            [&] {
              if (!stop_sent && stop()) {
                log_info("asked to stop; stopping");
                caf::anon_send(root, stop_atom::value);
                stop_sent = true;
              }
            });
  }
  return reason;
}

}  // namespace atl
