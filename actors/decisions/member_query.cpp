#include "actors/decisions/member_query.hpp"

#include <array>

namespace atl {
namespace {

constexpr std::array<const char*, 6> states = {"joining", "syncing", "active", "draining", "left", "dead"};

expected<std::size_t> parse_count(const std::string& key, const std::string& value) {
  if (value.empty() || value.size() > 9 || value.find_first_not_of("0123456789") != std::string::npos)
    return make_error(errc::invalid_config,
                      "members: " + key + " must be a whole number below 10^9, not '" + value + "'");
  return static_cast<std::size_t>(std::stoul(value));
}

}  // namespace

expected<member_query> parse_member_query(const std::string& text) {
  member_query q;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto end = std::min(text.find(',', start), text.size());
    const auto part = text.substr(start, end - start);
    start = end + 1;
    const auto eq = part.find('=');
    if (eq == std::string::npos)
      return make_error(errc::invalid_config, "members: '" + part + "' is not key=value (state, limit, offset)");
    const auto key = part.substr(0, eq), value = part.substr(eq + 1);
    if (key == "state") {
      bool known = false;
      for (const char* s : states) known = known || value == s;
      if (!known)
        return make_error(errc::invalid_config,
                          "members: unknown state '" + value + "' (joining, syncing, active, draining, left, dead)");
      q.state = value;
    } else if (key == "limit" || key == "offset") {
      auto n = parse_count(key, value);
      if (!n) return n.err();
      (key == "limit" ? q.limit : q.offset) = *n;
    } else {
      return make_error(errc::invalid_config, "members: unknown key '" + key + "' (state, limit, offset)");
    }
  }
  return q;
}

std::string to_string(const member_query& q) {
  std::string out;
  const auto add = [&out](const std::string& part) { out += (out.empty() ? "" : ",") + part; };
  if (q.state) add("state=" + *q.state);
  if (q.offset) add("offset=" + std::to_string(q.offset));
  if (q.limit) add("limit=" + std::to_string(q.limit));
  return out;
}

bool on_page(const member_query& q, std::size_t index) {
  return index >= q.offset && (q.limit == 0 || index - q.offset < q.limit);
}

}  // namespace atl
