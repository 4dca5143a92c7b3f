#pragma once
// The processes `atoll` starts. Each returns the process exit code.
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/error.hpp>

namespace atl {

struct head_options {
  std::string listen = "tcp://127.0.0.1:7070";
  std::string run_dir;
  std::string config_file;
  std::vector<std::string> overrides;  // "key=value"
  std::string metrics_file;            // default: RUN_DIR/metrics.jsonl
};
int run_head(const head_options& opt);

struct node_options {
  std::string head;
  std::string run_dir;
  std::vector<std::string> devices = {"cpu"};
  int threads = 0;  // 0: the run config's threads_per_worker, else cores / local workers
};
int run_node(const node_options& opt);

struct local_options {
  int nodes = 2;
  int workers_per_node = 1;
  std::string example;
  long steps = 0;  // 0: from config
  std::string config_file;
  std::vector<std::string> overrides;
  std::string run_dir;
  std::string metrics_file;
};
int run_local(const local_options& opt);

// Warns on stderr when LibTorch runs on Debian's reference BLAS (about 50x slower).
void warn_if_reference_blas();

// Installs SIGINT/SIGTERM handlers that set a flag; returns the flag.
const volatile bool& install_stop_signals();

// Blocks until `root` terminates, sending it stop_atom once on SIGINT/SIGTERM.
// Returns the actor's exit reason.
caf::error wait_for_actor(caf::actor_system& sys, const caf::actor& root);

}  // namespace atl
