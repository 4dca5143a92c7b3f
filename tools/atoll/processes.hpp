#pragma once
// The processes `atoll` starts. Each returns the process exit code. A node's and the head's
// are libraries of their own (node/node_process.hpp, which the Python module runs too, and
// head/head_process.hpp).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "head/head_process.hpp"
#include "node/lifecycle.hpp"
#include "node/node_process.hpp"

namespace atl {

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
  // Also write the data ledger of the exported rounds here (actors/shared/data_ledger.hpp).
  std::string ledger;
};
int run_export(const export_options& opt);

}  // namespace atl
