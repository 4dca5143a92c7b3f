#include "runtime/etcd/etcd_client.hpp"

#include <httplib.h>

#include <charconv>
#include <cstring>

#include <nlohmann/json.hpp>

#include "runtime/transport/head_endpoints.hpp"

namespace atl {
namespace {

using json = nlohmann::json;

constexpr char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// proto3's JSON writes int64 as a string and leaves out zero values. Anything else
// (an answer that is not etcd's) reads as 0, which every caller treats as absent: never
// an exception.
std::int64_t int64_of(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return 0;
  if (it->is_number_integer()) return it->get<std::int64_t>();
  if (!it->is_string()) return 0;
  const auto& text = it->get_ref<const std::string&>();
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return ec == std::errc() && end == text.data() + text.size() ? v : 0;
}

expected<etcd_value> value_of(const json& kv) {
  auto value = base64_decode(kv.value("value", std::string()));
  if (!value) return value.err();
  return etcd_value{*value, int64_of(kv, "create_revision"), int64_of(kv, "mod_revision"), int64_of(kv, "lease")};
}

// The answer's JSON, or a typed error for one that is not etcd's.
expected<json> parse(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const std::exception& e) {
    return make_error(errc::malformed_frame, std::string("etcd answered something that is not JSON: ") + e.what());
  }
}

// The end of the key range holding every key with `prefix`: the prefix with its last byte
// that is not 0xff incremented ("\0", every key, for a prefix of 0xff bytes only).
std::string prefix_end(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::string(1, '\0');
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

}  // namespace

std::string base64_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const auto n = (static_cast<unsigned char>(bytes[i]) << 16) | (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                   static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += alphabet[(n >> 6) & 63];
    out += alphabet[n & 63];
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const auto n =
        (static_cast<unsigned char>(bytes[i]) << 16) | (two ? static_cast<unsigned char>(bytes[i + 1]) << 8 : 0);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += two ? alphabet[(n >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

expected<std::string> base64_decode(const std::string& text) {
  if (text.size() % 4 != 0)
    return make_error(errc::malformed_frame, "base64 of " + std::to_string(text.size()) + " characters");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (std::size_t i = 0; i < text.size(); i += 4) {
    std::uint32_t n = 0;
    int padding = 0;
    for (std::size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      std::uint32_t v = 0;
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++padding;
      } else if (const char* at = std::strchr(alphabet, c); c != '\0' && at && padding == 0) {
        v = static_cast<std::uint32_t>(at - alphabet);
      } else {
        return make_error(errc::malformed_frame, std::string("base64: unexpected '") + c + "'");
      }
      n = (n << 6) | v;
    }
    out += static_cast<char>((n >> 16) & 255);
    if (padding < 2) out += static_cast<char>((n >> 8) & 255);
    if (padding < 1) out += static_cast<char>(n & 255);
  }
  return out;
}

etcd_client::etcd_client(const std::string& endpoints, std::chrono::milliseconds timeout)
    : endpoints_(split_endpoints(endpoints)), timeout_(timeout) {}

expected<std::string> etcd_client::call(const std::string& path, const std::string& body) {
  if (endpoints_.empty()) return make_error(errc::invalid_config, "no etcd endpoint (http://HOST:PORT[,...])");
  std::string tried;
  bool without_quorum = false;  // a member answered 503
  for (std::size_t k = 0; k < endpoints_.size(); ++k) {
    const std::size_t index = (preferred_ + k) % endpoints_.size();
    httplib::Client client(endpoints_[index]);
    const auto seconds = std::chrono::duration_cast<std::chrono::seconds>(timeout_);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(timeout_ - seconds);
    client.set_connection_timeout(seconds.count(), micros.count());
    client.set_read_timeout(seconds.count(), micros.count());
    client.set_write_timeout(seconds.count(), micros.count());
    auto res = client.Post(path.c_str(), body, "application/json");
    if (!res) {
      tried += (tried.empty() ? "" : "; ") + endpoints_[index] + ": " + httplib::to_string(res.error());
      continue;
    }
    if (res->status == 200) {
      preferred_ = index;
      return res->body;
    }
    // A member that lost its quorum (or is starting) answers 503: another may have one.
    tried += (tried.empty() ? "" : "; ") + endpoints_[index] + ": HTTP " + std::to_string(res->status) + " " +
             res->body.substr(0, 200);
    without_quorum = without_quorum || res->status == 503;
    if (res->status != 503) {
      auto error = parse(res->body);
      const std::string message = error ? error->value("message", error->value("error", res->body)) : res->body;
      return make_error(errc::invalid_config, "etcd refused " + path + ": " + message);
    }
  }
  // etcd's gateway drops the connection of a request past its --max-request-bytes (1.5 MiB by
  // default) instead of answering: say so, or the refusal reads as members that are down.
  const std::string too_large = body.size() > etcd_default_max_request_bytes
                                    ? "; the request was " + std::to_string(body.size()) +
                                          " bytes, past etcd's default --max-request-bytes (1.5 MiB)"
                                    : "";
  return make_error(without_quorum ? errc::not_ready : errc::timeout,
                    std::string(without_quorum ? "no etcd member has a quorum" : "no etcd member answered") + " (" +
                        tried + too_large + ")");
}

status etcd_client::put(const std::string& key, const std::string& value, std::int64_t lease) {
  json body = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease) body["lease"] = std::to_string(lease);
  auto res = call("/v3/kv/put", body.dump());
  return res ? status{} : status{res.err()};
}

expected<std::optional<etcd_value>> etcd_client::get(const std::string& key) {
  auto res = call("/v3/kv/range", json{{"key", base64_encode(key)}}.dump());
  if (!res) return res.err();
  auto j = parse(*res);
  if (!j) return j.err();
  const auto kvs = j->value("kvs", json::array());
  if (kvs.empty()) return std::optional<etcd_value>{};
  auto value = value_of(kvs[0]);
  if (!value) return value.err();
  return std::optional<etcd_value>{*value};
}

expected<std::vector<std::pair<std::string, etcd_value>>> etcd_client::get_prefix(const std::string& prefix) {
  auto res = call("/v3/kv/range",
                  json{{"key", base64_encode(prefix)}, {"range_end", base64_encode(prefix_end(prefix))}}.dump());
  if (!res) return res.err();
  auto j = parse(*res);
  if (!j) return j.err();
  std::vector<std::pair<std::string, etcd_value>> rows;
  for (const auto& kv : j->value("kvs", json::array())) {
    auto key = base64_decode(kv.value("key", std::string()));
    if (!key) return key.err();
    auto value = value_of(kv);
    if (!value) return value.err();
    rows.emplace_back(std::move(*key), std::move(*value));
  }
  return rows;
}

status etcd_client::erase(const std::string& key) {
  auto res = call("/v3/kv/deleterange", json{{"key", base64_encode(key)}}.dump());
  return res ? status{} : status{res.err()};
}

expected<etcd_claim> etcd_client::create_if_absent(const std::string& key, const std::string& value,
                                                   std::int64_t lease) {
  const auto k = base64_encode(key);
  json put = {{"key", k}, {"value", base64_encode(value)}};
  if (lease) put["lease"] = std::to_string(lease);
  const json txn = {
      {"compare", json::array({{{"key", k}, {"result", "EQUAL"}, {"target", "CREATE"}, {"create_revision", "0"}}})},
      {"success", json::array({{{"request_put", put}}, {{"request_range", {{"key", k}}}}})},
      {"failure", json::array({{{"request_range", {{"key", k}}}}})},
  };
  auto res = call("/v3/kv/txn", txn.dump());
  if (!res) return res.err();
  auto j = parse(*res);
  if (!j) return j.err();
  etcd_claim claim;
  claim.created = j->value("succeeded", false);
  for (const auto& r : j->value("responses", json::array())) {
    if (!r.contains("response_range")) continue;
    const auto kvs = r["response_range"].value("kvs", json::array());
    if (kvs.empty()) continue;
    auto holder = value_of(kvs[0]);
    if (!holder) return holder.err();
    claim.holder = *holder;
  }
  return claim;
}

expected<bool> etcd_client::write_if_held(const std::string& fence_key, std::int64_t fence_revision,
                                          const std::vector<etcd_write>& writes) {
  if (writes.size() > etcd_max_txn_ops)
    return make_error(errc::invalid_config, std::to_string(writes.size()) +
                                                " writes in one etcd transaction; etcd takes " +
                                                std::to_string(etcd_max_txn_ops) + " (--max-txn-ops)");
  json ops = json::array();
  for (const auto& w : writes) {
    if (w.erase) ops.push_back({{"request_delete_range", {{"key", base64_encode(w.key)}}}});
    else ops.push_back({{"request_put", {{"key", base64_encode(w.key)}, {"value", base64_encode(w.value)}}}});
  }
  const json txn = {
      {"compare", json::array({{{"key", base64_encode(fence_key)},
                                {"result", "EQUAL"},
                                {"target", "CREATE"},
                                {"create_revision", std::to_string(fence_revision)}}})},
      {"success", ops},
  };
  auto res = call("/v3/kv/txn", txn.dump());
  if (!res) return res.err();
  auto j = parse(*res);
  if (!j) return j.err();
  return j->value("succeeded", false);
}

expected<std::int64_t> etcd_client::grant_lease(std::chrono::seconds ttl) {
  auto res = call("/v3/lease/grant", json{{"TTL", std::to_string(ttl.count())}}.dump());
  if (!res) return res.err();
  auto j = parse(*res);
  if (!j) return j.err();
  const auto id = int64_of(*j, "ID");
  if (id == 0) return make_error(errc::malformed_frame, "etcd granted no lease: " + res->substr(0, 200));
  return id;
}

expected<std::chrono::seconds> etcd_client::keep_alive(std::int64_t lease) {
  auto res = call("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump());
  if (!res) return res.err();
  // The gateway streams one {"result": {...}} per request.
  auto j = parse(res->substr(0, res->find('\n')));
  if (!j) return j.err();
  const auto ttl = int64_of(j->value("result", json::object()), "TTL");
  if (ttl <= 0) return make_error(errc::not_ready, "etcd lease " + std::to_string(lease) + " expired");
  return std::chrono::seconds(ttl);
}

status etcd_client::revoke(std::int64_t lease) {
  auto res = call("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump());
  return res ? status{} : status{res.err()};
}

}  // namespace atl
