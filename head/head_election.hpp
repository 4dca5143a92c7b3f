#pragma once
// Which head leads, decided by etcd (runtime/etcd/etcd_client.hpp): each head that may lead
// campaigns for one key with a lease of its own; the one that creates the key leads, the
// others stand by. The key goes when its lease does (the leader died, or was cut off from
// etcd for its ttl), and a standby's next campaign takes it.
//
//   candidate --campaign, created the key--> leading (term = the key's create revision)
//   candidate --campaign, the key exists--> standing by (learns the leader and its term)
//   leading --renew fails (lease expired)--> deposed: must stop directing at once
//   standing by --campaign after the key went--> leading, with a greater term
//
// The term orders leaders: every later one's is greater (etcd's revisions only grow), so
// nodes, coordinators and keepers can fence a deposed head's commands by it.
#include <chrono>
#include <cstdint>
#include <string>

#include "runtime/etcd/etcd_client.hpp"

namespace atl {

struct election_outcome {
  bool leading = false;
  std::string leader;  // the leading candidate's name (its address, for heads)
  std::int64_t term = 0;
};

// What one campaign's claim means for the candidate holding lease `my_lease`: it leads if
// it created the key, or the key is bound to its lease (a campaign again). A key with its
// name but another lease (a restarted head's old one) is not its lead: that lease is not
// renewed, and the key goes with it. Pure.
election_outcome outcome_of(const etcd_claim& claim, std::int64_t my_lease);

// Where a run's registry lives in etcd: `atoll up --registry etcd://HOST:PORT[,...][/NAME]`.
struct etcd_registry {
  std::string endpoints;  // "http://HOST:PORT,..." for etcd_client
  std::string root;  // "/atoll/NAME" (NAME "default" when none): the run's keys
  std::string election_key() const { return root + "/leader"; }
  std::string http_key() const { return root + "/http"; }  // the leader's dashboard URL
};
// invalid_config naming what is wrong: another scheme, a member without host or port, a
// port out of range, a name with characters other than letters, digits, '.', '_', '-'.
expected<etcd_registry> parse_etcd_registry(const std::string& url);

// A leader renews its lease every ttl / 3 and stops directing once `ttl - margin` passed
// since the last renewal it sent that etcd took: etcd counts the ttl from when it took
// that renewal, later than the leader sent it, so the leader stops first. Pure.
std::chrono::milliseconds lead_margin(std::chrono::seconds ttl);
bool lead_lost(std::chrono::steady_clock::time_point last_renewal_sent, std::chrono::steady_clock::time_point now,
               std::chrono::seconds ttl);

class head_election {
 public:
  head_election(etcd_client& etcd, std::string key, std::string me, std::chrono::seconds ttl);

  // One attempt: leads if the key is free (taking it with this candidate's lease), else
  // says who leads. Typed errors from etcd (timeout, not_ready without a quorum).
  expected<election_outcome> campaign();
  // Keeps this candidate's lease alive; call it every ttl / 3. not_ready once it expired:
  // a leader that sees it is deposed.
  status renew();
  // Gives the lead up at once (the key goes with the lease).
  status resign();

 private:
  etcd_client& etcd_;
  std::string key_, me_;
  std::chrono::seconds ttl_;
  std::int64_t lease_ = 0;
};

}  // namespace atl
