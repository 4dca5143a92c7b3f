#include "actors/node/node_messages.hpp"

#include <unistd.h>
#include <cstdio>
#include <random>

#include "runtime/core/actor_id.hpp"

namespace atl {

void write_hello(wire::outgoing& out, const node_agent_config& cfg, std::uint32_t node_id) {
  auto h = out.envelope.initHello();
  h.setNodeId(node_id);
  auto devices = h.initDevices(static_cast<unsigned>(cfg.devices.size()));
  for (unsigned i = 0; i < cfg.devices.size(); ++i) devices.set(i, cfg.devices[i]);
  h.setHostname(cfg.hostname);
  h.setPid(static_cast<std::uint32_t>(::getpid()));
  h.setCanKeep(!cfg.data_dir.empty());
  h.setDataEndpoint(cfg.data_endpoint);
  h.setModelDigest(cfg.model_digest);
  h.setBatchJob(cfg.batch_job);
  h.setModelSignature(cfg.model_signature);
}

void write_heartbeat(wire::outgoing& out, const heartbeat_facts& facts, const traffic_counters& counters) {
  auto hb = out.envelope.initHeartbeat();
  hb.setNodeId(facts.node_id);
  auto refused = hb.initRefused(static_cast<unsigned>(counters.refused.size()));
  for (unsigned i = 0; i < counters.refused.size(); ++i) refused.set(i, counters.refused[i].load());
  hb.setHandshakesFailed(counters.handshakes_failed.load());
  hb.setWorkerRestarts(facts.worker_restarts);
  hb.setRoutesEpoch(facts.routes_epoch);
  hb.setRoutesDigest(facts.routes_digest);
}

std::string provisional_node_id(const std::string& token) {
  std::string unique = token;
  if (unique.empty()) {
    std::random_device rd;
    const std::uint64_t bits = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(bits));
    unique = hex;
  }
  return pending_node_id(std::to_string(::getpid()) + "-" + unique);
}

}  // namespace atl
