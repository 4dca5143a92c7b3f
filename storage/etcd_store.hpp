#pragma once
// The registry's durable state in etcd (`atoll up --registry etcd://...`), behind the same
// kv_store interface as RocksDB, so a head elected later (head/head_election.hpp) on
// another machine resumes exactly where the lost one left off. Tensors never come here:
// only the registry's small records do.
//
// Keys are ROOT/COLUMN/KEY. Every commit is one etcd transaction that applies only while
// the election key still has the writing head's term as its create revision, so a
// deposed head's writes are refused (errc::stale_epoch) whatever it still believes; etcd
// commits through its raft log, so `sync` changes nothing.
#include <cstdint>
#include <memory>
#include <string>

#include "storage/kv_store.hpp"

namespace atl {

// The lead a writer holds: the election key and the term it won (the key's create revision).
struct etcd_fence {
  std::string election_key;
  std::int64_t term = 0;
};

// `endpoints`: the members, "http://HOST:PORT,...". The store makes its own client.
std::unique_ptr<kv_store> make_etcd_store(const std::string& endpoints, std::string root, etcd_fence fence);

}  // namespace atl
