// The ZeroMQ transport with real sockets on loopback, in one process.
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/control_client.hpp"
#include "runtime/zmq_transport.hpp"

namespace atl {
namespace {

TEST(ZmqTransport, RoutesOfControlClientsStayBounded) {
  directory dir;  // no registry: requests are counted as unknown_peer after their route is learned
  cluster_identity cluster("c");
  zmq_transport head(zmq_transport::role::server, "tcp://127.0.0.1:0", dir, cluster);
  const std::size_t clients = zmq_transport::max_client_routes + 40;
  for (std::size_t i = 0; i < clients; ++i)
    (void)control_request(head.bound_endpoint(), "status", "", std::chrono::milliseconds(1));
  // Wait until the I/O thread has seen every request (each was refused: no registry here).
  for (int i = 0; i < 200 && head.counters().refused[static_cast<std::size_t>(errc::unknown_peer)] < clients; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(head.counters().refused[static_cast<std::size_t>(errc::unknown_peer)].load(), clients);
  EXPECT_LE(head.route_count(), zmq_transport::max_client_routes);
  EXPECT_GE(head.route_count(), zmq_transport::max_client_routes - 1);
}

}  // namespace
}  // namespace atl
