#include "runtime/transport/head_endpoints.hpp"

namespace atl {

std::vector<std::string> split_endpoints(const std::string& list) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    auto one = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!one.empty()) out.push_back(std::move(one));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

void connect_to_heads(zmq::socket_t& socket, const std::string& list) {
  const auto heads = split_endpoints(list);
  // One head keeps the old behaviour: messages queue while it restarts and leave when it is back.
  if (heads.size() > 1) {
    socket.set(zmq::sockopt::immediate, 1);
    // A head cut off by a partition sends no FIN: without pings its connection would look
    // complete for minutes and take its share of the messages. Only this side pings (no
    // TTL asked of the head), so a stopped node is still judged by its lease alone.
    socket.set(zmq::sockopt::heartbeat_ivl, heartbeat_interval_ms);
    socket.set(zmq::sockopt::heartbeat_timeout, heartbeat_timeout_ms);
  }
  for (const auto& head : heads) socket.connect(head);
}

}  // namespace atl
