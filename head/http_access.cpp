#include "head/http_access.hpp"

#include <sys/stat.h>

#include <fstream>
#include <random>

namespace atl {
namespace {

bool same_token(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

http_verdict decide_http(const http_access& access, bool action, const std::string& authorization) {
  const std::string prefix = "Bearer ";
  const bool has_token = !access.token.empty() && authorization.compare(0, prefix.size(), prefix) == 0 &&
                         same_token(authorization.substr(prefix.size()), access.token);
  if (has_token) return http_verdict::allow;
  if (!action && access.loopback) return http_verdict::allow;
  return http_verdict::refuse;
}

bool is_loopback_host(const std::string& host) {
  return host == "localhost" || host == "::1" || host == "[::1]" || host.rfind("127.", 0) == 0;
}

expected<std::string> load_or_create_http_token(const std::string& keys_dir) {
  const std::string path = keys_dir + "/http.token";
  {
    std::ifstream in(path);
    std::string token;
    if (in && std::getline(in, token) && token.size() == 64) return token;
    if (in) return make_error(errc::invalid_config, path + ": not a 64-digit token (delete it to make a new one)");
  }
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string token;
  for (int i = 0; i < 64; ++i) token += hex[rd() % 16];
  const auto old_mask = ::umask(077);
  std::ofstream out(path, std::ios::trunc);
  out << token << "\n";
  ::umask(old_mask);
  if (!out.flush()) return make_error(errc::storage_failure, "cannot write " + path);
  return token;
}

}  // namespace atl
