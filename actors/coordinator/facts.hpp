#pragma once
// What the coordinator's pure decisions are asked (actors/decisions/held_requests.hpp): the
// facts of a StateRequest and of a Contribution, read from the coordinator's state.
#include <cstdint>
#include <string>

#include "actors/coordinator/base.hpp"
#include "actors/decisions/held_requests.hpp"

namespace atl::coordinator_detail {

std::uint64_t held_digest_of(const wire::message& state_request);
// `members_suffice`: the Membership is a quorum (closing.hpp, membership_ready).
held_requests::state_request_facts state_request_facts_of(const coordinator_state& st, const wire::message& request,
                                                          bool members_suffice);
held_requests::contribution_facts contribution_facts_of(const coordinator_state& st, const wire::message& contribution);

}  // namespace atl::coordinator_detail
