#pragma once
// Which members a listing shows (`atollctl members --state S --limit N --offset K`, GET
// /api/members?state=S&limit=N&offset=K): at a thousand nodes a listing of every member is
// a thousand rows, so a user asks for a state and a page. Pure: parsing and the page's
// bounds; the registry's view applies them.
//
//   "state=dead,limit=50,offset=100"  each part optional, in any order; "": every member
#include <cstddef>
#include <optional>
#include <string>

#include "runtime/core/expected.hpp"

namespace atl {

struct member_query {
  std::optional<std::string> state;  // joining, syncing, active, draining, left, dead
  std::size_t offset = 0;  // members skipped, in node-id order, after the state filter
  std::size_t limit = 0;  // 0: every member from the offset on
};

// A part that is not key=value, an unknown key or state, or a number that is not a
// non-negative integer below 10^9 is an invalid_config error naming it.
expected<member_query> parse_member_query(const std::string& text);
// The text that parses to `q` (what atollctl sends).
std::string to_string(const member_query& q);
// Whether the `index`-th member that passed the state filter is on the page.
bool on_page(const member_query& q, std::size_t index);

}  // namespace atl
