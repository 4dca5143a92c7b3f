#include "runtime/core/actor_id.hpp"

namespace atl {
namespace {

constexpr std::size_t max_token = 48;

error malformed(std::string_view text, const std::string& why) {
  // The id is untrusted: quote at most its first 64 bytes.
  return make_error(errc::malformed_id, "'" + std::string(text.substr(0, 64)) + "': " + why);
}

}  // namespace

std::optional<std::uint32_t> parse_id_number(std::string_view digits) {
  if (digits.empty() || digits.size() > 10 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
  std::uint64_t n = 0;
  for (const char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  if (n > UINT32_MAX) return std::nullopt;
  return static_cast<std::uint32_t>(n);
}

namespace {

bool valid_token(std::string_view token) {
  if (token.empty() || token.size() > max_token) return false;
  for (const char c : token)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
          c == '-'))
      return false;
  return true;
}

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

}  // namespace

std::string registry_id() { return "registry"; }
std::string coordinator_id(std::uint32_t fragment) { return "coord/" + std::to_string(fragment); }
std::string node_actor_id(std::uint32_t node) { return "node/" + std::to_string(node); }
std::string worker_id(std::uint32_t node, std::uint32_t index) {
  return "worker/" + std::to_string(node) + "." + std::to_string(index);
}
std::string keeper_id(std::uint32_t keeper) { return "keeper/" + std::to_string(keeper); }
std::string pending_node_id(std::string_view token) { return "node/pending-" + std::string(token); }
std::string control_id(std::string_view token) { return "ctl/" + std::string(token); }

std::string actor_id::str() const {
  switch (kind) {
    case actor_kind::registry: return registry_id();
    case actor_kind::coordinator: return coordinator_id(number);
    case actor_kind::node: return node_actor_id(number);
    case actor_kind::pending_node: return pending_node_id(token);
    case actor_kind::worker: return worker_id(number, index);
    case actor_kind::keeper: return keeper_id(number);
    case actor_kind::control: return control_id(token);
  }
  return {};
}

expected<actor_id> parse_actor_id(std::string_view text) {
  actor_id id;
  if (text == "registry") return id;
  const auto slash = text.find('/');
  if (slash == std::string_view::npos) return malformed(text, "no kind/ prefix");
  const auto kind = text.substr(0, slash);
  const auto rest = text.substr(slash + 1);
  if (kind == "coord" || kind == "keeper") {
    const auto n = parse_id_number(rest);
    if (!n) return malformed(text, "expected a decimal number after " + std::string(kind) + "/");
    id.kind = kind == "coord" ? actor_kind::coordinator : actor_kind::keeper;
    id.number = *n;
    return id;
  }
  if (kind == "node") {
    if (starts_with(rest, "pending-")) {
      id.kind = actor_kind::pending_node;
      id.token = std::string(rest.substr(8));
      if (!valid_token(id.token)) return malformed(text, "bad pending-node token");
      return id;
    }
    const auto n = parse_id_number(rest);
    if (!n) return malformed(text, "expected node/N");
    id.kind = actor_kind::node;
    id.number = *n;
    return id;
  }
  if (kind == "worker") {
    const auto dot = rest.find('.');
    const auto node = parse_id_number(rest.substr(0, dot));
    const auto index = dot == std::string_view::npos ? std::nullopt : parse_id_number(rest.substr(dot + 1));
    if (!node || !index) return malformed(text, "expected worker/N.K");
    id.kind = actor_kind::worker;
    id.number = *node;
    id.index = *index;
    return id;
  }
  if (kind == "ctl") {
    id.kind = actor_kind::control;
    id.token = std::string(rest);
    if (!valid_token(id.token)) return malformed(text, "bad control-client token");
    return id;
  }
  return malformed(text, "unknown kind '" + std::string(kind.substr(0, 16)) + "'");
}

std::optional<std::uint32_t> fragment_of_coordinator(std::string_view text) {
  const auto id = parse_actor_id(text);
  if (!id || id->kind != actor_kind::coordinator) return std::nullopt;
  return id->number;
}

std::optional<std::uint32_t> node_of(std::string_view text) {
  const auto id = parse_actor_id(text);
  if (!id || id->kind != actor_kind::node) return std::nullopt;
  return id->number;
}

std::optional<std::uint32_t> host_node_of(std::string_view text) {
  const auto id = parse_actor_id(text);
  if (!id || (id->kind != actor_kind::node && id->kind != actor_kind::worker)) return std::nullopt;
  return id->number;
}

bool is_kind(std::string_view text, actor_kind kind) {
  const auto id = parse_actor_id(text);
  return id && id->kind == kind;
}

}  // namespace atl
