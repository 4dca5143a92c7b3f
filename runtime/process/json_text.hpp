#pragma once
// JSON as text, whatever the strings in it: what peers said (a command, a hostname, a thread
// layout) need not be UTF-8, and nlohmann::json::dump() throws on such bytes. They are
// replaced (U+FFFD) instead: one node's bytes must not make every later answer, metrics line
// or save of the registry throw (found by tests/protocol/hostile_handlers_test.cpp).
#include <string>

#include <nlohmann/json.hpp>

namespace atl {

inline std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace atl
