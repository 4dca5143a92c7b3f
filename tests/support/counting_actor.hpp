#pragma once
// An actor that stands in for any receiver in transport tests: it counts what it is given.
#include <atomic>

#include <caf/all.hpp>

#include "runtime/transport/transport.hpp"

namespace atl::testing {

inline caf::behavior counting_actor(caf::event_based_actor*, std::atomic<int>* delivered) {
  return {[delivered](const wire::message_ptr&) { (*delivered)++; }};
}

}  // namespace atl::testing
