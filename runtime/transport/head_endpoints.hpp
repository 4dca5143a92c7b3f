#pragma once
// A node (or atollctl) given several heads (`atoll join --head A,B`): only the leading head
// listens (the others stand by, head/head_election.hpp), so connecting to all of them
// and sending only over connections that completed (ZMQ_IMMEDIATE) reaches the leader,
// whichever it is, and the next one once it takes over.
#include <string>
#include <vector>

#include <zmq.hpp>

namespace atl {

// "tcp://a:7070,tcp://b:7070" -> each endpoint; empty parts are skipped.
std::vector<std::string> split_endpoints(const std::string& list);

// Connects `socket` to every endpoint in `list`. With more than one, messages go only to
// completed connections: none queues for a head that does not listen; and a connection
// whose head has not answered a ping for heartbeat_timeout_ms is dropped (a partitioned head).
void connect_to_heads(zmq::socket_t& socket, const std::string& list);
inline constexpr int heartbeat_interval_ms = 1000;
inline constexpr int heartbeat_timeout_ms = 3000;

}  // namespace atl
