#pragma once
// The registry's handlers of requests: a ControlRequest (atollctl, `atoll leave`; "down"
// stops every node, then the head), the same commands asked in process by the head's HTTP
// server, and a coordinator's MembershipRequest.
#include <string>
#include <utility>
#include <vector>

#include "actors/registry/outbox.hpp"

namespace atl::registry_detail {

// A control command's answer, the same for the wire (atollctl, atoll leave) and for the
// head's HTTP server: ok and the JSON body (an error's description when not ok). A model
// chunk goes into `tensors`.
std::pair<bool, std::string> answer(self_ptr self, const std::string& command, const std::string& argument,
                                    std::vector<wire::tensor>& tensors);
void on_control(self_ptr self, const wire::message_ptr& msg);
void on_membership_request(self_ptr self, const wire::message_ptr& msg);

}  // namespace atl::registry_detail
