#include "runtime/head_election.hpp"

namespace atl {

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
