#pragma once
// Warm start (actors/worker/warm.cpp, actors/decisions/warm_start.hpp): a joiner asks the
// donors the coordinators named for their inner-optimizer state, and a donor lends its own.
#include <chrono>

#include "actors/worker/steps.hpp"

namespace atl {

// False when there is nothing to wait for (it starts cold, or run.warm_start is off).
bool start_warm(worker_self self);
// A donor's reply, and the joiner's tick: true when the warm start is over (installed, or
// given up: the joiner starts cold), and the shell resumes the worker.
bool on_inner_state_reply(worker_self self, const wire::message_ptr& msg);
bool warm_tick(worker_self self, std::chrono::steady_clock::duration patience);
void lend_inner_state(worker_self self, const wire::message& msg);

}  // namespace atl
