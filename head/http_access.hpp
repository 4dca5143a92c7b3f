#pragma once
// Who may use the head's HTTP endpoint (/metrics, the dashboard, its one action).
//
//   bound to loopback, a read (GET) ---------------------------> allowed, no token
//   bound elsewhere, a read, with the right bearer token ------> allowed
//   bound elsewhere, a read, without it -----------------------> refused (401)
//   an action (drain a node), with the right bearer token -----> allowed
//   an action without it --------------------------------------> refused (401), wherever bound
//
// The token is KEYS/http.token (runtime/transport/security.hpp's key folder): 64 hex digits, created
// the first time the head serves HTTP with that folder. Compared in constant time.
#include <string>

#include "runtime/core/expected.hpp"

namespace atl {

enum class http_verdict { allow, refuse };

struct http_access {
  bool loopback = true;  // the server is bound to a loopback address
  std::string token;  // empty: none configured (actions are then always refused)
};

// `authorization`: the request's Authorization header ("Bearer <token>"), empty if none.
http_verdict decide_http(const http_access& access, bool action, const std::string& authorization);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback_host(const std::string& host);

// KEYS/http.token, created (owner-only) if missing.
expected<std::string> load_or_create_http_token(const std::string& keys_dir);

}  // namespace atl
