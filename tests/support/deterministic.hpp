#pragma once
// CAF's deterministic scheduler for the protocol tier: every actor runs on the test's own
// thread when the test says so, and time is simulated (timers fire when the test advances
// the clock or triggers them). No threads, no sleeps.
#include <vector>

#include <caf/all.hpp>
#include <caf/scheduler/test_coordinator.hpp>

#include "runtime/transport/wire.hpp"

namespace atl::testing {

// `cfg` set up for the testing scheduler, with CAF's own log quiet.
inline caf::actor_system_config& deterministic(caf::actor_system_config& cfg) {
  cfg.set("scheduler.policy", caf::atom("testing"));
  cfg.set("logger.verbosity", caf::atom("quiet"));
  return cfg;
}

inline caf::scheduler::test_coordinator& test_scheduler(caf::actor_system& sys) {
  return dynamic_cast<caf::scheduler::test_coordinator&>(sys.scheduler());
}

// Records every message to the ids it is registered under.
inline caf::behavior recorder(caf::event_based_actor*, std::vector<wire::message_ptr>* seen) {
  return {[=](const wire::message_ptr& msg) { seen->push_back(msg); }};
}

}  // namespace atl::testing
