#pragma once
// The quorum policy's facts, and rounds closed without every participant
// (actors/coordinator/closing.cpp). A function that completes the open round returns true:
// the shell then commits it.
#include <cstdint>
#include <vector>

#include "actors/coordinator/base.hpp"
#include "actors/shared/pseudo_gradient.hpp"

namespace atl::coordinator_detail {

bool membership_ready(const coordinator_state& st);  // a Membership of a quorum
// Closes open round `round` if the policy says so (true); within an adaptive grace, asks
// again when it ends.
bool close_or_wait(self_ptr self, std::uint64_t round);
// round_deadline after its first contribution: closed, or looked at again later.
bool on_deadline(self_ptr self, std::uint64_t round);
// A participant sent the round after the open one: the round goes on without it, its
// contribution held for the next.
bool skip_open_round(self_ptr self, const wire::message_ptr& msg);
// A participant said in a StateRequest that it starts past the open round: the round goes
// on without it, and its requests wait for a round with it.
bool leave_out(self_ptr self, const wire::message& request);
// Late work for the round before the open one (decoded into `values`, or kept `encoded`):
// folded into the open round, and the sender gets the result it missed.
bool take_late_work(self_ptr self, const wire::message_ptr& msg, std::vector<float> values, encoded_values encoded);

}  // namespace atl::coordinator_detail
