#pragma once
// A node (`atoll join`): its links to the head and to the other nodes, its node agent and
// workers, until the run ends or it is told to stop. The `atoll` binary runs it as a
// process, and the Python module (python/) inside the user's own process, with the user's
// model: both sit on this library.
#include <functional>
#include <string>
#include <vector>

#include "actors/worker/replica.hpp"
#include "runtime/core/error.hpp"

namespace atl {

struct node_options {
  std::string head;
  std::string run_dir;
  std::vector<std::string> devices = {"cpu"};
  int threads = 0;  // 0: the run config's threads_per_worker, else cores / local workers
  std::string keys_dir;  // CURVE keys (`atoll keygen`); empty: plain TCP
  std::string client_key;  // a key file other than KEYS/client.key
  bool insecure = false;  // allow plain TCP to a non-loopback head
  // Data endpoint peers send tensors to: empty picks a free port on the address that reaches
  // the head; "tcp://HOST:PORT" binds there (0 picks a port).
  std::string listen;
  bool no_listen = false;  // behind NAT: the head relays this node's tensors
  std::string model_file;  // this node's own copy of the run's model; empty: fetched from the head
  int wait_for_head_s = 300;  // give up when no head answers this long; 0: wait for ever
  // "tcp://HOST:PORT": GET /livez and /readyz for probes (node/health_http.hpp); empty: none.
  std::string health;
  int liveness_grace_s = 30;  // live while the agent beat within this long
};
// A node whose model is the user's own (the Python API, run.example = external): its
// worker's replicas, the model's signature, and how it learns to stop (instead of SIGINT
// and SIGTERM, which stay the embedding process's). `failure` receives the reason a node
// gave up or could not start.
struct external_node {
  replica_factory factory;
  std::string signature;
  std::function<bool()> stop_requested;
  std::function<void(const error&)> failure;
};
int run_node(const node_options& opt, const external_node* external = nullptr);

}  // namespace atl
