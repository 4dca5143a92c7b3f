// The lease proxy on CAF's deterministic scheduler with simulated time: renewed, it lives;
// unrenewed for a lease, it goes down unreachable; suspected (its node's connection
// closed) and unrenewed for the confirm window, it goes down remote_link_unreachable; a
// renewal after the suspicion keeps it alive. No thread, no sleep.
#include "actors/registry/lease_proxy.hpp"

#include <gtest/gtest.h>
#include "actors/shared/messages.hpp"
#include "tests/support/deterministic.hpp"

namespace atl {
namespace {

using namespace std::chrono_literals;

class LeaseProxy : public ::testing::Test {
 protected:
  LeaseProxy() : sys_(testing::deterministic(cfg_)), sched_(testing::test_scheduler(sys_)) {}

  // A proxy of `lease` and `confirm` and an actor that records its down message.
  void start(std::chrono::milliseconds lease, std::chrono::milliseconds confirm) {
    proxy_ = sys_.spawn(lease_proxy, std::string("node/7"), lease, confirm);
    watcher_ = sys_.spawn([this](caf::event_based_actor* self) -> caf::behavior {
      self->monitor(proxy_);
      self->set_down_handler([this](caf::down_msg& down) { reason_ = down.reason; });
      return {[](int) {}};
    });
    sched_.run();
  }

  // Advances simulated time by `span` in 10 ms steps (never past it), renewing every
  // `renew_every` (0: never); stops early once the proxy is down.
  void run_for(std::chrono::milliseconds span, std::chrono::milliseconds renew_every = 0ms) {
    const auto end = sched_.clock().now() + span;
    auto next_renewal = sched_.clock().now() + renew_every;
    sched_.run();
    while (sched_.clock().now() < end && !reason_) {
      sched_.clock().advance_time(10ms);
      if (renew_every.count() > 0 && sched_.clock().now() >= next_renewal) {
        caf::anon_send(proxy_, renew_atom::value, std::int64_t{0});
        next_renewal += renew_every;
      }
      sched_.run();
    }
  }

  void TearDown() override {
    caf::anon_send_exit(proxy_, caf::exit_reason::user_shutdown);
    caf::anon_send_exit(watcher_, caf::exit_reason::user_shutdown);
    sched_.run();
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  caf::actor proxy_;
  caf::actor watcher_;  // held: an actor nobody holds is gone
  caf::error reason_;
};

TEST_F(LeaseProxy, LivesWhileRenewedAndGoesDownUnreachableWhenTheLeaseRunsOut) {
  start(1000ms, 300ms);
  run_for(5000ms, 250ms);  // five leases of renewals
  EXPECT_FALSE(reason_) << "went down although renewed";
  const auto silent_from = sched_.clock().now();
  run_for(5000ms);
  EXPECT_EQ(reason_, caf::exit_reason::unreachable);
  const auto took = sched_.clock().now() - silent_from;
  EXPECT_GE(took, 750ms);  // the last renewal was up to 250 ms before
  EXPECT_LE(took, 1010ms);  // at the lease's end (the test's clock moves in 10 ms steps)
}

// A heartbeat that waited 400 ms in the registry's mailbox renews the lease from when it
// arrived: the proxy goes down 400 ms sooner than if it counted from the renewal.
TEST_F(LeaseProxy, ARenewalCountsFromTheHeartbeatsArrivalNotFromWhenItWasHandled) {
  start(1000ms, 0ms);
  run_for(500ms);
  caf::anon_send(proxy_, renew_atom::value, std::int64_t{400'000});  // arrived 400 ms ago
  sched_.run();
  const auto renewed_at = sched_.clock().now();
  run_for(5000ms);
  EXPECT_EQ(reason_, caf::exit_reason::unreachable);
  const auto took = sched_.clock().now() - renewed_at;
  EXPECT_GE(took, 590ms);
  EXPECT_LE(took, 610ms) << "the lease counted from the renewal, not from the heartbeat's arrival";
}

// A renewal older than the one before it moves nothing back.
TEST_F(LeaseProxy, AnOlderRenewalDoesNotShortenTheLease) {
  start(1000ms, 0ms);
  run_for(500ms);
  caf::anon_send(proxy_, renew_atom::value, std::int64_t{0});
  caf::anon_send(proxy_, renew_atom::value, std::int64_t{900'000});  // arrived before the first
  sched_.run();
  const auto renewed_at = sched_.clock().now();
  run_for(5000ms);
  EXPECT_EQ(reason_, caf::exit_reason::unreachable);
  EXPECT_GE(sched_.clock().now() - renewed_at, 990ms);
}

TEST_F(LeaseProxy, ASuspectThatDoesNotAnswerWithinConfirmGoesDownRemoteLinkUnreachable) {
  start(20000ms, 500ms);
  run_for(2000ms, 1000ms);
  caf::anon_send(proxy_, suspect_atom::value);
  sched_.run();
  const auto suspected_at = sched_.clock().now();
  run_for(20000ms);
  EXPECT_EQ(reason_, caf::exit_reason::remote_link_unreachable);
  EXPECT_EQ(sched_.clock().now() - suspected_at, 500ms) << "down when the confirm window ends, not at the lease";
}

TEST_F(LeaseProxy, ASuspectThatAnswersLivesAndOnlyItsLeaseCanEndIt) {
  start(4000ms, 500ms);
  caf::anon_send(proxy_, suspect_atom::value);
  sched_.run();
  run_for(200ms);
  caf::anon_send(proxy_, renew_atom::value, std::int64_t{0});  // it answered: the connection came back
  sched_.run();
  run_for(3000ms);  // past the first suspicion's window, within the lease
  EXPECT_FALSE(reason_) << "a renewed suspect stays alive";
  run_for(5000ms);
  EXPECT_EQ(reason_, caf::exit_reason::unreachable);
}

TEST_F(LeaseProxy, WithConfirmOffASuspicionChangesNothing) {
  start(2000ms, 0ms);
  caf::anon_send(proxy_, suspect_atom::value);
  sched_.run();
  run_for(1500ms);
  EXPECT_FALSE(reason_);
  run_for(2000ms);
  EXPECT_EQ(reason_, caf::exit_reason::unreachable);
}

}  // namespace
}  // namespace atl
