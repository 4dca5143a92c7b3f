#include "head/head_election.hpp"

#include <cctype>

#include "runtime/transport/head_endpoints.hpp"

namespace atl {

expected<etcd_registry> parse_etcd_registry(const std::string& url) {
  const std::string scheme = "etcd://";
  if (url.compare(0, scheme.size(), scheme) != 0)
    return make_error(errc::invalid_config, "--registry " + url + ": expected etcd://HOST:PORT[,HOST:PORT...][/NAME]");
  const auto rest = url.substr(scheme.size());
  const auto slash = rest.find('/');
  const auto hosts = split_endpoints(rest.substr(0, slash));
  std::string name = slash == std::string::npos ? "" : rest.substr(slash + 1);
  if (name.empty()) name = "default";
  for (const char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      return make_error(errc::invalid_config, "--registry " + url + ": the run name '" + name +
                                                  "' may hold letters, digits, '.', '_' and '-' only");
  if (hosts.empty()) return make_error(errc::invalid_config, "--registry " + url + ": no etcd member named");
  etcd_registry out;
  for (const auto& host : hosts) {
    const auto colon = host.rfind(':');
    const auto port = colon == std::string::npos ? std::string() : host.substr(colon + 1);
    const bool digits = !port.empty() && port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos;
    if (colon == 0 || !digits || std::stoi(port) < 1 || std::stoi(port) > 65535)
      return make_error(errc::invalid_config, "--registry " + url + ": '" + host + "' is not HOST:PORT");
    out.endpoints += (out.endpoints.empty() ? "http://" : ",http://") + host;
  }
  out.root = "/atoll/" + name;
  return out;
}

std::chrono::milliseconds lead_margin(std::chrono::seconds ttl) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 6;
}

bool lead_lost(std::chrono::steady_clock::time_point last_renewal_sent, std::chrono::steady_clock::time_point now,
               std::chrono::seconds ttl) {
  return now >= last_renewal_sent + ttl - lead_margin(ttl);
}

election_outcome outcome_of(const etcd_claim& claim, std::int64_t my_lease) {
  election_outcome out;
  out.leader = claim.holder.value;
  out.term = claim.holder.create_revision;
  out.leading = claim.created || (my_lease != 0 && claim.holder.lease == my_lease);
  return out;
}

head_election::head_election(etcd_client& etcd, std::string key, std::string me, std::chrono::seconds ttl)
    : etcd_(etcd), key_(std::move(key)), me_(std::move(me)), ttl_(ttl) {}

expected<election_outcome> head_election::campaign() {
  if (lease_ == 0 || renew()) {  // no lease of our own, or it expired: a new one
    auto lease = etcd_.grant_lease(ttl_);
    if (!lease) return lease.err();
    lease_ = *lease;
  }
  auto claim = etcd_.create_if_absent(key_, me_, lease_);
  if (!claim) return claim.err();
  return outcome_of(*claim, lease_);
}

status head_election::renew() {
  if (lease_ == 0) return make_error(errc::not_ready, "no lease: campaign first");
  auto left = etcd_.keep_alive(lease_);
  if (!left) {
    if (left.err().code == errc::not_ready) lease_ = 0;  // expired: gone with its key
    return left.err();
  }
  return {};
}

status head_election::resign() {
  if (lease_ == 0) return {};
  auto st = etcd_.revoke(lease_);
  lease_ = 0;
  return st;
}

}  // namespace atl
