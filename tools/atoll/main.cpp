// atoll: the launcher. `atoll --help` and `atoll SUBCOMMAND --help` document every flag.
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/core/exit_status.hpp"
#include "runtime/device/compute_env.hpp"
#include "runtime/process/config.hpp"
#include "runtime/transport/control_client.hpp"
#include "tools/atoll/processes.hpp"

namespace {

// Empty entries are kept: the node refuses them by name (runtime/device/device.hpp).
std::vector<std::string> split_devices(const std::string& list) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : list + ",") {
    if (c == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  return out;
}

// The algorithm's most used knobs as flags; each becomes a --set override, so the knob
// table validates it like any other.
struct algorithm_flags {
  std::string fragments, shards, sync_every, overlap, alpha, codec, mode;
  bool error_feedback = false;

  void add_to(CLI::App* cmd) {
    cmd->add_option("--fragments", fragments, "P: fragments synced separately (diloco.fragments)");
    cmd->add_option("--shards", shards,
                    "S: slices each fragment's round is reduced in (diloco.shards; default auto: the head chooses)");
    cmd->add_option("--sync-every", sync_every, "H: inner steps per outer round (diloco.sync_every)");
    cmd->add_option("--overlap", overlap, "tau: steps trained before a result is merged (diloco.overlap)");
    cmd->add_option("--alpha", alpha, "merge weight of the local parameters (diloco.alpha)");
    cmd->add_option("--codec", codec, "fp32, bf16, fp16, int8 or fp4 (diloco.codec)");
    cmd->add_flag("--error-feedback", error_feedback, "carry quantization error to the next round");
    cmd->add_option("--mode", mode, "diloco, or ddp for the data-parallel baseline (run.mode)");
  }
  void append_to(std::vector<std::string>& overrides) const {
    const std::pair<const char*, const std::string*> flags[] = {{"diloco.fragments", &fragments},
                                                                {"diloco.shards", &shards},
                                                                {"diloco.sync_every", &sync_every},
                                                                {"diloco.overlap", &overlap},
                                                                {"diloco.alpha", &alpha},
                                                                {"diloco.codec", &codec},
                                                                {"run.mode", &mode}};
    for (const auto& [key, value] : flags)
      if (!value->empty()) overrides.push_back(std::string(key) + "=" + *value);
    if (error_feedback) overrides.push_back("diloco.error_feedback=true");
  }
};

// What to train on: a TorchScript model and a token file. Data flags become --set
// overrides like the algorithm's.
struct training_input_flags {
  std::string data, data_format, vocab;

  void add_to(CLI::App* cmd, std::string& model_file) {
    cmd->add_option("--model", model_file,
                    "a TorchScript model (torch.jit.script/trace, saved) to train instead of the built-in example; "
                    "forward(int64 [B, T]) -> logits [B, T, V] (README: Your own model)")
        ->check(CLI::ExistingFile);
    cmd->add_option("--data", data, "token file to train on, on every node at this path (run.data)");
    cmd->add_option("--data-format", data_format, "bytes (vocabulary 256) or u16 (nanoGPT's .bin) (run.data_format)");
    cmd->add_option("--vocab", vocab, "vocabulary size (run.vocab; u16 with the built-in GPT needs it)");
  }
  void append_to(std::vector<std::string>& overrides) const {
    if (!data.empty()) overrides.push_back("run.data=" + data);
    if (!data_format.empty()) overrides.push_back("run.data_format=" + data_format);
    if (!vocab.empty()) overrides.push_back("run.vocab=" + vocab);
  }
};

// Keys for a one-shot control request; nullopt (after printing why) on a bad folder.
std::optional<atl::link_security> client_security_from(const std::string& keys_dir, const char* command) {
  if (keys_dir.empty()) return atl::link_security{};
  auto loaded = atl::load_client_security(keys_dir);
  if (!loaded) {
    std::cerr << command << ": " << loaded.err().describe() << "\n";
    return std::nullopt;
  }
  return *loaded;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "atoll: elastic low-communication training (DiLoCo) on a cluster of actors.\n"
      "Quick start: `atoll local` trains the default example on a local cluster."};
  app.require_subcommand(1);

  atl::head_options head;
  auto* up = app.add_subcommand("up", "start the head (registry, checkpoint keeper, coordinators)");
  up->add_option("--listen", head.listen, "endpoint to bind, e.g. tcp://0.0.0.0:7070 (port 0 picks a free one)")
      ->capture_default_str();
  up->add_option("--run-dir", head.run_dir, "folder for the head's RocksDB and metrics; an existing one resumes")
      ->required();
  up->add_option("--config", head.config_file, "TOML config (see `atoll config`)")->check(CLI::ExistingFile);
  up->add_option("--set", head.overrides, "override a knob: --set diloco.sync_every=25 (repeatable)");
  up->add_option("--metrics", head.metrics_file, "JSON-lines metrics file (default RUN_DIR/metrics.jsonl)");
  up->add_option("--keys", head.keys_dir, "CURVE key folder from `atoll keygen` (head.key, authorized_keys)");
  up->add_flag("--insecure", head.insecure, "allow plain TCP on a non-loopback address (not recommended)");
  up->add_option("--registry", head.registry,
                 "etcd://HOST:PORT[,HOST:PORT...][/NAME]: keep the registry in etcd; heads started alike elect "
                 "one leader and the others take over if it is lost");
  up->add_option("--election-ttl", head.election_ttl_s,
                 "seconds a leading head may go unheard by etcd before another takes over (with --registry)")
      ->capture_default_str();
  up->add_option("--http", head.http,
                 "serve /metrics and the dashboard at tcp://HOST:PORT (port 0 picks one); off loopback every "
                 "request needs the bearer token KEYS/http.token");
  algorithm_flags up_flags;
  up_flags.add_to(up);
  training_input_flags up_inputs;
  up_inputs.add_to(up, head.model_file);

  atl::node_options node;
  std::string devices = "cpu";
  auto* join = app.add_subcommand("join", "start a node: registers with the head, runs one worker per device");
  join->add_option("--head", node.head,
                   "the head's endpoint, e.g. tcp://10.0.0.1:7070; heads that fail over: all of them, comma-separated")
      ->required();
  join->add_option("--run-dir", node.run_dir,
                   "folder for this node's files; with it the node may host a keeper replica (its RocksDB)");
  join->add_option("--devices", devices, "comma-separated devices: cpu or cuda:0,cuda:1")->capture_default_str();
  join->add_option("--threads", node.threads,
                   "compute threads (LibTorch and BLAS) for this process (default: cores / workers)")
      ->check(CLI::Range(0, 1024));
  join->add_option("--keys", node.keys_dir, "CURVE key folder from `atoll keygen` (client.key, head.pub)");
  join->add_option("--client-key", node.client_key, "this node's own key file (`atoll keygen --client NAME`)");
  join->add_flag("--insecure", node.insecure, "allow plain TCP to a non-loopback head (not recommended)");
  join->add_option("--wait-for-head", node.wait_for_head_s,
                   "seconds to wait for a head that does not answer yet (a batch job that starts before the "
                   "head's), saying so every 10 s; 0: for ever")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000000));
  auto* listen = join->add_option("--listen", node.listen,
                                  "data endpoint peers send this node tensors to, e.g. tcp://10.0.0.2:7071 (port 0 "
                                  "picks one); default: a free port on the address that reaches the head");
  join->add_flag("--no-listen", node.no_listen,
                 "open no port (behind NAT): the head relays this node's tensors, at the cost of two hops")
      ->excludes(listen);
  join->add_option("--model", node.model_file,
                   "this node's own copy of the run's model (default: the node fetches it from the head)")
      ->check(CLI::ExistingFile);
  join->add_option("--health", node.health,
                   "serve GET /livez and /readyz at tcp://HOST:PORT for probes (Kubernetes): live while this "
                   "process's actors turn, ready while it is a member of the run");
  join->add_option("--liveness-grace", node.liveness_grace_s, "seconds without a tick before /livez fails")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600));

  atl::local_options local;
  auto* loc = app.add_subcommand("local", "run a head and N nodes on this machine and train to completion");
  loc->add_option("--nodes", local.nodes, "node processes")->capture_default_str()->check(CLI::Range(1, 256));
  loc->add_option("--workers-per-node", local.workers_per_node, "workers per node")
      ->capture_default_str()
      ->check(CLI::Range(1, 64));
  loc->add_option("--devices", local.devices,
                  "each node's devices, e.g. cuda:0 (one worker per entry; default: cpu per worker)");
  loc->add_option("--example", local.example, "registered example (default: shakespeare)");
  loc->add_option("--steps", local.steps, "inner steps per worker (default: from config)")
      ->check(CLI::Range(1L, 1000000000L));
  loc->add_option("--config", local.config_file, "TOML config (see `atoll config`)")->check(CLI::ExistingFile);
  loc->add_option("--set", local.overrides, "override a knob: --set diloco.sync_every=25 (repeatable)");
  loc->add_option("--run-dir", local.run_dir, "folder for logs, state and metrics (default atoll-runs/local-TIME)");
  loc->add_option("--metrics", local.metrics_file, "JSON-lines metrics file (default RUN_DIR/metrics.jsonl)");
  loc->add_option("--relayed-nodes", local.relayed_nodes,
                  "how many of the nodes open no data port (`atoll join --no-listen`): the head relays their tensors")
      ->capture_default_str()
      ->check(CLI::Range(0, 256));
  loc->add_option("--http", local.http, "where the head serves the dashboard and /metrics (printed at start)")
      ->capture_default_str();
  loc->add_flag("--plain-links", local.plain_links,
                "links without CURVE (plain TCP on loopback, like Gloo's): to measure what encryption costs");
  algorithm_flags local_flags;
  local_flags.add_to(loc);
  training_input_flags local_inputs;
  local_inputs.add_to(loc, local.model_file);

  std::string down_head, down_keys;
  auto* down = app.add_subcommand("down", "stop a cluster: nodes stop their workers, the head exits");
  down->add_option("--head", down_head, "the head's endpoint")->required();
  down->add_option("--keys", down_keys, "the cluster's key folder, if it has keys");

  std::string leave_head, leave_keys;
  unsigned leave_node = 0;
  auto* leave = app.add_subcommand("leave",
                                   "take a node out of a running cluster: its workers stop taking part, a keeper "
                                   "replica it hosts is handed over to another node, then the node says goodbye "
                                   "and exits (SIGTERM on a node does the same)");
  leave->add_option("NODE", leave_node, "node id, as `atollctl members` shows it")->required();
  leave->add_option("--head", leave_head, "the head's endpoint")->required();
  leave->add_option("--keys", leave_keys, "the cluster's key folder, if it has keys");

  std::string keygen_out, keygen_client;
  auto* keygen = app.add_subcommand("keygen", "create the cluster's CURVE keys, or add a named client key");
  keygen->add_option("--out", keygen_out, "key folder to create (existing keys are never overwritten)")->required();
  keygen->add_option("--client", keygen_client, "add a client key NAME to an existing folder and authorize it");

  atl::export_options exp;
  std::uint64_t export_round = 0;
  auto* export_cmd = app.add_subcommand(
      "export", "write theta_global of a committed round as a file PyTorch loads (works while the run goes on)");
  export_cmd->add_option("--run-dir", exp.run_dir, "the run dir given to `atoll local` or `atoll up`")->required();
  export_cmd->add_option("--out", exp.out, "file to write: TorchScript for --model runs, else a state dict");
  auto* round_opt = export_cmd->add_option("--round", export_round,
                                           "committed round (every fragment's); default: each fragment's latest");
  export_cmd->add_flag("--force", exp.force, "overwrite --out if it exists");
  export_cmd->add_option(
      "--keeper-dir", exp.keeper_dirs,
      "a replica keeper's store (a node's RUN_DIR/keeper-N), read beside the head's; those under "
      "--run-dir are read without naming them (storage.keepers = nodes keeps the newest rounds there)");
  export_cmd->add_option("--registry", exp.registry,
                         "etcd://HOST:PORT[,...][/NAME]: the run's registry, for heads started with --registry (then "
                         "--run-dir may be any folder holding the keepers' stores)");
  export_cmd->add_flag("--list", exp.list,
                       "write nothing: list every stored round of every fragment, with its digest and the stores "
                       "holding it");
  export_cmd->add_flag("--json", exp.as_json, "print what was written (fragments, rounds, digests) as JSON");
  export_cmd->add_option("--ledger", exp.ledger,
                         "also write the data ledger as JSON: per epoch, the units the exported rounds learned, with "
                         "the fragment and round that committed each (the run's data cursor)");

  app.add_subcommand("config", "list every config knob with its default, unit and meaning");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print and succeed; a flag or value atoll cannot use is a
    // configuration error (runtime/core/exit_status.hpp), which a controller does not retry.
    const int printed = app.exit(e);
    return printed == 0 ? 0 : atl::code_of(atl::exit_status::config);
  }

  if (*up) {
    atl::tune_allocator_for_training();
    up_flags.append_to(head.overrides);
    up_inputs.append_to(head.overrides);
    return atl::run_head(head);
  }
  if (*join) {
    atl::reexec_with_compute_env(argv);  // this process trains (runtime/device/compute_env.hpp)
    atl::tune_allocator_for_training();
    node.devices = split_devices(devices);
    return atl::run_node(node);
  }
  if (*loc) {
    local_flags.append_to(local.overrides);
    local_inputs.append_to(local.overrides);
    if (!local.devices.empty()) {
      if (local.workers_per_node != 1) {
        std::cerr << "atoll local: give --devices or --workers-per-node, not both\n";
        return 2;
      }
      local.workers_per_node = static_cast<int>(split_devices(local.devices).size());
    }
    return atl::run_local(local);
  }
  if (*export_cmd) {
    if (round_opt->count() > 0) exp.round = export_round;
    return atl::run_export(exp);
  }
  if (*keygen) {
    if (!keygen_client.empty()) {
      auto path = atl::add_client_key(keygen_out, keygen_client);
      if (!path) {
        std::cerr << "atoll keygen: " << path.err().describe() << "\n";
        return 2;
      }
      std::cout << "wrote " << *path << " and authorized it in " << keygen_out << "/authorized_keys\n"
                << "use it with: atoll join --keys " << keygen_out << " --client-key " << *path << "\n";
      return 0;
    }
    if (auto err = atl::write_key_folder(keygen_out)) {
      std::cerr << "atoll keygen: " << err.describe() << "\n";
      return 2;
    }
    std::cout << "wrote CURVE keys to " << keygen_out << ":\n"
              << "  head.key, authorized_keys  for `atoll up --keys " << keygen_out << "` (keep on the head)\n"
              << "  client.key, head.pub       for `atoll join --keys " << keygen_out << "` and atollctl --keys\n";
    return 0;
  }
  if (*leave) {
    auto security = client_security_from(leave_keys, "atoll leave");
    if (!security) return 2;
    auto reply = atl::control_request(leave_head, "leave", std::to_string(leave_node), std::chrono::milliseconds(5000),
                                      *security);
    if (!reply || !reply->ok) {
      std::cerr << "atoll leave: " << (reply ? reply->json : reply.err().describe()) << "\n";
      return 1;
    }
    const auto body = nlohmann::json::parse(reply->json, nullptr, false);
    if (body.is_object() && body.value("handing_over", false))
      std::cout << "node " << leave_node
                << " is draining; it hosts a keeper replica and exits once a new one on another node has caught up "
                   "(at most cluster.handover_ms)\n";
    else std::cout << "node " << leave_node << " is draining; it exits once its workers have stopped\n";
    return 0;
  }
  if (*down) {
    auto down_security = client_security_from(down_keys, "atoll down");
    if (!down_security) return 2;
    auto reply = atl::control_request(down_head, "down", "", std::chrono::milliseconds(5000), *down_security);
    if (!reply) {
      std::cerr << "atoll down: " << reply.err().describe() << "\n";
      return 1;
    }
    std::cout << "cluster at " << down_head << " is stopping\n";
    return 0;
  }
  std::cout << "# Atoll config knobs: TOML section.key = default  [unit]\n" << atl::describe_knobs();
  return 0;
}
