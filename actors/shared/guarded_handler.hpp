#pragma once
// No message may kill an actor. In CAF 0.17 an exception that leaves a handler ends the
// actor (scheduled_actor's exception handler can only choose the exit reason), and the
// registry's end stops the head: one envelope that passed decode but threw in its handler
// (a Cap'n Proto read past its budget, issue 67) could stop a whole run. Every role's
// handler of wire messages therefore runs its body through guarded():
//
//   message --> guarded(role point) --> handler body
//                  | throws kj::Exception   --> Refusal malformed_frame  (the message is unreadable)
//                  | throws std::exception --> Refusal handler_failed   (the handler failed on it)
//                  '--> counted in the process's refusals (atoll_refused_messages_total),
//                       logged with the kind and sender; the actor takes its next message
//
// A Refusal that throws is counted and logged, never answered (two actors refusing each
// other's refusals would never stop). What a throwing handler had changed before it threw
// stays changed: each role's protocol treats the message as lost, which every protocol
// already survives (a sender repeats what was not acknowledged).
#include <exception>
#include <string>

#include "runtime/process/fault_point.hpp"
#include "runtime/transport/transport.hpp"

namespace atl {

// The error a handler's exception becomes: malformed_frame for Cap'n Proto's (kj::Exception),
// handler_failed for any other.
error error_of_thrown(std::exception_ptr thrown);

// Refuses `msg` with error_of_thrown(thrown), counted, and logs it as `role`'s.
void refuse_thrown(mailer& mail, const wire::message& msg, std::uint64_t epoch, const std::string& role,
                   std::exception_ptr thrown);

// Runs handle() for `msg`; what it throws is refused (refuse_thrown), never rethrown.
// `point` names the role's throwing point (runtime/process/fault_point.hpp), e.g.
// "registry.handler"; its role is the part before the dot.
template <class Handle>
void guarded(mailer& mail, const wire::message& msg, std::uint64_t epoch, const char* point, Handle&& handle) {
  try {
    ATL_THROW_POINT(point);
    handle();
  } catch (...) {
    const std::string name = point;
    refuse_thrown(mail, msg, epoch, name.substr(0, name.find('.')), std::current_exception());
  }
}

}  // namespace atl
