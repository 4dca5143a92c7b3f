#pragma once
// What a node agent says to the registry before and while it runs, made apart from the
// actor: its Hello, its Heartbeat, and the provisional id it answers to until the Welcome.
#include <cstdint>
#include <string>

#include "actors/node/node_config.hpp"
#include "runtime/transport/transport.hpp"
#include "runtime/transport/wire.hpp"

namespace atl {

// The Hello of node `node_id` (0: a new node; a known id: a node reconnecting after a
// head restart, which gets its old slots back).
void write_hello(wire::outgoing& out, const node_agent_config& cfg, std::uint32_t node_id);

struct heartbeat_facts {
  std::uint32_t node_id = 0;
  std::uint64_t worker_restarts = 0;  // ordered by this node's supervisor
  std::uint64_t routes_epoch = 0, routes_digest = 0;  // the PeerTable it holds
};
// With the transport's refusals by reason and failed handshakes.
void write_heartbeat(wire::outgoing& out, const heartbeat_facts& facts, const traffic_counters& counters);

// node/pending-<pid>-<token>; an empty token: 64 random bits, so that nodes starting
// together in one process (bench scale's simulated nodes) or on hosts whose pids match do
// not answer to the same id (with 1 in 100,000, two of 100 nodes in one process did, one
// time in twenty, and one of them never joined).
std::string provisional_node_id(const std::string& token);

}  // namespace atl
