#include <csignal>

#include "tools/atoll/processes.hpp"

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

}  // namespace atl
