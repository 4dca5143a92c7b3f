#include "actors/lease_proxy.hpp"

#include <gtest/gtest.h>
#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

// Renewed in time, the proxy lives; left alone for a lease, it goes down as unreachable,
// which is how the registry learns that a remote node's lease ran out.
TEST(LeaseProxy, LivesWhileRenewedAndGoesDownUnreachableWhenTheLeaseRunsOut) {
  caf::actor_system_config cfg;
  caf::actor_system sys{cfg};
  caf::scoped_actor self{sys};
  auto proxy = sys.spawn(lease_proxy, std::string("node/7"), 200ms);
  self->monitor(proxy);
  for (int i = 0; i < 6; ++i) {  // 600 ms of renewals, three leases
    std::this_thread::sleep_for(50ms);
    self->send(proxy, renew_atom::value);
  }
  bool down_early = false;
  self->receive([&](caf::down_msg&) { down_early = true; }, caf::after(0ms) >> [] {});
  EXPECT_FALSE(down_early) << "went down although renewed";

  const auto stopped = std::chrono::steady_clock::now();
  caf::error reason;
  self->receive([&](caf::down_msg& down) { reason = down.reason; },
                caf::after(2s) >> [] { ADD_FAILURE() << "no down message after the lease"; });
  EXPECT_EQ(reason, caf::exit_reason::unreachable);
  const auto took = std::chrono::steady_clock::now() - stopped;
  EXPECT_GE(took, 100ms);  // the last renewal was ~0-50 ms before; the lease is 200 ms
  EXPECT_LT(took, 1s);
}

}  // namespace
}  // namespace atl
