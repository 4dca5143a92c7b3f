#pragma once
// The processes `atoll` starts. Each returns the process exit code.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <caf/error.hpp>

#include "actors/worker/replica.hpp"
#include "runtime/core/error.hpp"
#include "runtime/transport/security.hpp"

namespace atl {

struct head_options {
  std::string listen = "tcp://127.0.0.1:7070";
  std::string run_dir;
  std::string config_file;
  std::vector<std::string> overrides;  // "key=value"
  std::string metrics_file;  // default: RUN_DIR/metrics.jsonl
  std::string keys_dir;  // CURVE keys (`atoll keygen`); empty: plain TCP
  bool insecure = false;  // allow plain TCP on a non-loopback address
  std::string model_file;  // a TorchScript model to train (copied to RUN_DIR/model.pt)
  std::string http;  // "tcp://HOST:PORT": /metrics and the dashboard (tools/atoll/head_http.hpp); empty: none
  // "etcd://HOST:PORT[,HOST:PORT...][/NAME]": the registry lives in etcd and heads fail over
  // (tools/atoll/head_failover.cpp); empty: in RUN_DIR's RocksDB, one head.
  std::string registry;
  int election_ttl_s = 3;  // the leading head's etcd lease: a lost head is replaced after about this long
};
int run_head(const head_options& opt);

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

struct local_options {
  int nodes = 2;
  int workers_per_node = 1;
  std::string devices;  // each node's --devices; empty: "cpu" per worker
  std::string example;
  long steps = 0;  // 0: from config
  std::string config_file;
  std::vector<std::string> overrides;
  std::string run_dir;
  std::string metrics_file;
  int relayed_nodes = 0;  // the last N nodes join with --no-listen
  std::string model_file;  // a TorchScript model (`--model`); the nodes receive it from the head
  std::string http = "tcp://127.0.0.1:0";  // the head's dashboard and /metrics (`atoll up --http`)
  bool plain_links = false;  // loopback plain TCP, no CURVE keys (benchmarks against unencrypted peers)
};
int run_local(const local_options& opt);

struct export_options {
  std::string run_dir;  // of `atoll up` or `atoll local`
  std::string out;
  std::optional<std::uint64_t> round;  // none: each fragment's latest committed round
  bool force = false;  // overwrite an existing file
  bool as_json = false;  // print what was written (or, with list, the rounds) as JSON
  bool list = false;  // write nothing: list every stored round and the stores holding it
  // Replica keepers' stores (a node's RUN_DIR/keeper-N) read beside the head's: with
  // storage.keepers = nodes the newest rounds are only there. Those under run_dir (the
  // nodes of `atoll local`) are found without naming them.
  std::vector<std::string> keeper_dirs;
  // etcd://...: the run's registry is in etcd (`atoll up --registry`); run_dir may then be
  // any head's run dir, or a folder holding the replicas' stores.
  std::string registry;
};
int run_export(const export_options& opt);

// The link security of `atoll up` (server) or `atoll join` (client): keys from
// `keys_dir`, or plain TCP, which needs `insecure` unless `endpoint` is loopback (then it
// warns). Errors name the flag to fix.
enum class link_side { server, client };
expected<link_security> resolve_link_security(link_side side, const std::string& endpoint, const std::string& keys_dir,
                                              const std::string& client_key, bool insecure, const char* command);

// Warns on stderr when LibTorch runs on Debian's reference BLAS (about 50x slower).
void warn_if_reference_blas();

// Installs SIGINT/SIGTERM handlers that set a flag; returns the flag.
const volatile bool& install_stop_signals();

// The actor system of a head or node process: two scheduler threads (each worker trains
// on its own detached thread).
void configure_actor_system(caf::actor_system_config& cfg);

// Blocks until `root` terminates, sending it stop_atom once on SIGINT/SIGTERM.
// Returns the actor's exit reason.
caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root);
// The same, asking the root to stop once stop_requested() is true (polled every 200 ms).
caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root, const std::function<bool()>& stop_requested);

}  // namespace atl
