#pragma once
// A small client of etcd's v3 API through its JSON gateway (etcd 3.4: POST /v3/kv/...,
// /v3/lease/...), over the HTTP library the head already links: the first step of a head
// that can be lost (issue 34), whose registry state and election live in the consensus
// store people already run. Keys and values are bytes (base64 on the wire, here strings).
//
// Endpoints: several members ("http://127.0.0.1:2379,http://127.0.0.1:22379"); a request
// that cannot reach one (connection refused, timeout, a member without quorum answering
// 503) goes to the next, so one member down changes nothing. Errors are typed:
// errc::timeout when no member answers, errc::not_ready when none has a quorum,
// errc::malformed_frame for an answer that is not etcd's.
//
// Thread-compatible (one object per thread); each request opens its own connection.
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/error.hpp"
#include "runtime/core/expected.hpp"

namespace atl {

struct etcd_value {
  std::string value;
  std::int64_t create_revision = 0;  // the revision that created the key (an election's term)
  std::int64_t mod_revision = 0;
  std::int64_t lease = 0;  // 0: none
};

// The outcome of create_if_absent: whether this call created the key, and the key's value
// and revisions either way.
struct etcd_claim {
  bool created = false;
  etcd_value holder;
};

// One write of a transaction: a put, or the key's deletion.
struct etcd_write {
  std::string key;
  std::string value;
  bool erase = false;
};

// etcd refuses a transaction of more operations than this (its --max-txn-ops default).
inline constexpr std::size_t etcd_max_txn_ops = 128;
// The largest request etcd takes by default (its --max-request-bytes).
inline constexpr std::size_t etcd_default_max_request_bytes = 1536 * 1024;

class etcd_client {
 public:
  // `endpoints`: comma-separated http://HOST:PORT of the cluster's members.
  explicit etcd_client(const std::string& endpoints,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  const std::vector<std::string>& endpoints() const { return endpoints_; }

  status put(const std::string& key, const std::string& value, std::int64_t lease = 0);
  expected<std::optional<etcd_value>> get(const std::string& key);
  // Every key starting with `prefix`, in key order.
  expected<std::vector<std::pair<std::string, etcd_value>>> get_prefix(const std::string& prefix);
  status erase(const std::string& key);
  // Creates `key` with `value` (and `lease`) unless it exists: one transaction, so of two
  // callers exactly one creates it. The basis of an election.
  expected<etcd_claim> create_if_absent(const std::string& key, const std::string& value, std::int64_t lease);
  // Applies `writes` in one transaction if `fence_key` still has create revision
  // `fence_revision` (the writer still holds the lead it won with that term); false, and
  // nothing written, if not. invalid_config for more than etcd_max_txn_ops writes.
  expected<bool> write_if_held(const std::string& fence_key, std::int64_t fence_revision,
                               const std::vector<etcd_write>& writes);

  // Leases: a key put with one goes when it expires (ttl without a keep-alive) or is revoked.
  expected<std::int64_t> grant_lease(std::chrono::seconds ttl);
  // The lease's remaining ttl after renewing it; not_ready once it expired.
  expected<std::chrono::seconds> keep_alive(std::int64_t lease);
  status revoke(std::int64_t lease);

 private:
  // POSTs `body` to `path` on the first member that answers; its JSON text.
  expected<std::string> call(const std::string& path, const std::string& body);

  std::vector<std::string> endpoints_;
  std::chrono::milliseconds timeout_;
  std::size_t preferred_ = 0;  // the member that answered last
};

// Base64 of bytes and back (RFC 4648, with padding), as etcd's gateway writes them.
std::string base64_encode(const std::string& bytes);
expected<std::string> base64_decode(const std::string& text);

}  // namespace atl
