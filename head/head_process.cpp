// `atoll up`: the head process (registry and checkpoint keeper; the registry places the
// fragment coordinators on nodes).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>

#include <caf/all.hpp>

#include "actors/keeper/keeper.hpp"
#include "actors/registry/registry.hpp"
#include "actors/shared/messages.hpp"
#include "actors/shared/slicing.hpp"
#include "head/head_http.hpp"
#include "head/head_internal.hpp"
#include "head/head_process.hpp"
#include "node/lifecycle.hpp"
#include "runtime/algorithm/slices.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/model_signature.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/model_transfer.hpp"
#include "runtime/transport/zmq_transport.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

std::string new_cluster_id() {
  std::random_device rd;
  std::uniform_int_distribution<unsigned long long> dist;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", dist(rd));
  return buf;
}

// Where the head keeps its copy of the run's TorchScript model: what nodes fetch and
// what `atoll export` writes the trained parameters into.
std::string model_copy(const std::string& run_dir) { return run_dir + "/model.pt"; }

// A --model run: checks the module against the contract (no data needed on the head),
// copies it into the run dir and records its digest in the config every node receives.
status adopt_model(run_config& cfg, const std::string& file, const std::string& copy) {
  cfg.example = "torchscript";
  if (auto err = check_task(cfg, file, 1, /*with_data=*/false)) return err;
  auto digest = file_digest(file);
  if (!digest) return digest.err();
  std::error_code ec;
  std::filesystem::copy_file(file, copy, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return make_error(errc::storage_failure, "cannot copy " + file + " to " + copy + ": " + ec.message());
  cfg.file = std::filesystem::absolute(file).string();
  cfg.digest = *digest;
  log_info("model " + cfg.file + " (digest " + cfg.digest + ") kept as " + copy);
  return {};
}

// diloco.shards = auto made a number for the run's life (its units' round logs are their
// own): auto_shards over the model's fragments, which the head builds once to see them. The
// star where the head cannot see the model (run.example = external: the Python nodes' own)
// or a round averages whole fragments (run.mode = ddp).
status resolve_auto_shards(run_config& cfg, const std::string& model_file) {
  if (cfg.shards != 0) return {};
  if (cfg.example == external_example || cfg.mode == "ddp") {
    cfg.shards = 1;
    log_info(std::string("diloco.shards = auto: 1 (") +
             (cfg.mode == "ddp" ? "run.mode = ddp averages whole fragments" : "the nodes' own model is not seen here") +
             "; --set diloco.shards=S to choose)");
    return {};
  }
  auto sizes = model_fragment_sizes(cfg, model_file);
  if (!sizes) return sizes.err();
  const auto granule = slice_granule_of(cfg);
  cfg.shards = static_cast<std::int64_t>(auto_shards(*sizes, granule, static_cast<std::size_t>(cfg.min_workers),
                                                     static_cast<std::size_t>(max_sync_units)));
  std::size_t smallest = sizes->empty() ? 0 : *std::min_element(sizes->begin(), sizes->end());
  log_info("diloco.shards = auto: " + std::to_string(cfg.shards) + " (run.min_workers " +
           std::to_string(cfg.min_workers) + ", at most " + std::to_string(max_auto_shards) +
           ", the smallest fragment " + std::to_string(smallest) + " values in granules of " + std::to_string(granule) +
           ")");
  return {};
}

// A head taking over a --model run on another machine: its run dir has no copy yet, and
// --model names the file (checked against the run's digest next).
status adopt_missing_model_copy(const run_config& cfg, const head_options& opt) {
  const auto copy = model_copy(opt.run_dir);
  if (cfg.digest.empty() || opt.model_file.empty() || std::filesystem::exists(copy)) return {};
  std::error_code ec;
  std::filesystem::copy_file(opt.model_file, copy, ec);
  if (ec)
    return make_error(errc::storage_failure, "cannot copy " + opt.model_file + " to " + copy + ": " + ec.message());
  return {};
}

// A resumed --model run still has the model it started with.
status check_model_copy(const run_config& cfg, const std::string& copy) {
  if (cfg.digest.empty()) return {};
  auto digest = file_digest(copy);
  if (!digest) return digest.err();
  if (*digest != cfg.digest)
    return make_error(errc::model_mismatch, copy + " has digest " + *digest + ", the run was started with " +
                                                cfg.digest + " (restore the file or start a new run dir)");
  return {};
}

// The HTTP endpoint: the token from the key folder (none without keys: then only reads,
// and only on loopback); its URL in RUN_DIR/http.endpoint for atollctl, tests and `atoll local`.
expected<std::unique_ptr<head_http>> start_http(caf::actor_system& sys, const caf::actor& registry,
                                                const head_options& opt) {
  http_access access;
  if (!opt.keys_dir.empty()) {
    auto token = load_or_create_http_token(opt.keys_dir);
    if (!token) return token.err();
    access.token = *token;
  }
  auto http = head_http::start(sys, registry, opt.http, access, default_web_dir());
  if (!http) return http.err();
  if (!(*http)->loopback() && access.token.empty())
    return make_error(errc::invalid_config,
                      "--http " + opt.http + " is not loopback: it needs --keys (its bearer token, http.token)");
  { std::ofstream(opt.run_dir + "/http.endpoint") << (*http)->url() << "\n"; }
  log_info("dashboard and /metrics at " + (*http)->url() +
           (access.token.empty() ? " (no token: read-only)" : " (token in " + opt.keys_dir + "/http.token)"));
  return http;
}

}  // namespace

expected<registry_snapshot> initial_snapshot(registry_store& store, const head_options& opt) {
  auto stored = store.load();
  if (!stored) return stored.err();
  if (*stored) {
    if (!opt.config_file.empty() || !opt.overrides.empty() || !opt.model_file.empty())
      log_warn("resuming run " + (*stored)->cluster_id + ": its stored config is used; --config/--set/--model ignored");
    return **stored;
  }
  run_config cfg;
  if (!opt.config_file.empty()) {
    auto loaded = load_config_file(opt.config_file);
    if (!loaded) return loaded.err();
    cfg = *loaded;
  }
  for (const auto& o : opt.overrides)
    if (auto err = apply_override(cfg, o)) return err;
  if (!opt.model_file.empty()) {
    if (auto err = adopt_model(cfg, opt.model_file, model_copy(opt.run_dir))) return err;
  } else if (cfg.example == "torchscript") {
    return make_error(errc::invalid_config, "run.example = torchscript needs the model: atoll up --model FILE.pt");
  }
  if (cfg.example != external_example && !has_task(cfg.example)) {
    std::string names;
    for (const auto& n : task_names()) names += (names.empty() ? "" : ", ") + n;
    return make_error(errc::invalid_config, "run.example: unknown example '" + cfg.example + "' (have: " + names + ")");
  }
  if (auto err = resolve_auto_shards(cfg, opt.model_file.empty() ? std::string() : model_copy(opt.run_dir))) return err;
  registry_snapshot snap;
  snap.cluster_id = new_cluster_id();
  snap.config_toml = to_toml(cfg);
  if (auto err = store.save(snap)) return err;
  return snap;
}

int run_head(const head_options& opt) {
  set_log_name("atoll head");
  warn_if_reference_blas();
  if (opt.run_dir.empty()) {
    std::cerr << "atoll up: --run-dir is required\n";
    return code_of(exit_status::config);
  }
  std::error_code ec;
  std::filesystem::create_directories(opt.run_dir, ec);
  if (ec) {
    std::cerr << "atoll up: cannot create " << opt.run_dir << ": " << ec.message() << "\n";
    return code_of(exit_status::config);
  }
  auto db = open_rocksdb_store(opt.run_dir + "/db");
  if (!db) {
    std::cerr << "atoll up: " << db.err().describe() << "\n";
    return code_of(exit_status::retriable);
  }
  // Heads that fail over keep the registry in etcd; the run dir keeps keeper/0's rounds.
  if (!opt.registry.empty()) return run_failover_head(opt, **db);
  registry_store reg_store(**db);
  auto snap = initial_snapshot(reg_store, opt);
  if (!snap) {
    std::cerr << "atoll up: " << snap.err().describe() << "\n";
    return code_of(exit_status::config);
  }
  const auto& stop = install_stop_signals();
  direct_run_hooks hooks;
  hooks.stop = [&stop] { return stop; };
  return direct_run(opt, **db, reg_store, *snap, hooks);
}

int direct_run(const head_options& opt, kv_store& db, registry_store& reg_store, const registry_snapshot& snap,
               const direct_run_hooks& hooks) {
  auto cfg = parse_config_text(snap.config_toml, "stored config");
  if (!cfg) {
    std::cerr << "atoll up: " << cfg.err().describe() << "\n";
    return code_of(exit_status::config);
  }
  if (hooks.fenced && cfg->keepers != "nodes") {
    std::cerr << "atoll up: --registry needs storage.keepers = nodes: with the rounds on the head alone, the "
                 "head that takes over would not have them\n";
    return code_of(exit_status::config);
  }
  if (auto err = adopt_missing_model_copy(*cfg, opt)) {
    std::cerr << "atoll up: " << err.describe() << "\n";
    return code_of(exit_status::config);
  }
  if (auto err = check_model_copy(*cfg, model_copy(opt.run_dir))) {
    std::cerr << "atoll up: " << err.describe() << "\n";
    return code_of(exit_status::config);
  }
  auto security = resolve_link_security(link_side::server, opt.listen, opt.keys_dir, {}, opt.insecure, "atoll up");
  if (!security) {
    std::cerr << "atoll up: " << security.err().describe() << "\n";
    return code_of(exit_status::config);
  }
  checkpoint_store checkpoints(db, static_cast<std::uint64_t>(cfg->keep_rounds), log_options_for(*cfg));
  directory local;
  cluster_identity cluster(snap.cluster_id);
  shared_routes routes;  // the registry's PeerTable, read by the ingress
  std::unique_ptr<zmq_transport> net;
  try {
    wire::limits limits;
    limits.max_tensor_bytes = static_cast<std::size_t>(cfg->max_frame_mb) << 20;
    zmq_link_options options;
    options.senders = &routes;  // with CURVE: a node's key speaks only for that node's ids
    // A node's closed connection goes to the registry, which asks the node to answer
    // (cluster.confirm_ms; actors/decisions/liveness.hpp). `local` outlives the transport.
    options.on_node_disconnected = [&local](const std::string& node) {
      if (auto registry = local.find(registry_id())) caf::anon_send(registry, link_lost_atom::value, node);
    };
    net = std::make_unique<zmq_transport>(zmq_transport::role::server, opt.listen, local, cluster, limits, *security,
                                          options);
  } catch (const zmq::error_t& e) {
    std::cerr << "atoll up: cannot listen on " << opt.listen << ": " << e.what() << "\n";
    return code_of(exit_status::retriable);
  }
  net->set_route_takeover(std::chrono::milliseconds(cfg->lease_ms / 2));
  { std::ofstream(opt.run_dir + "/head.endpoint") << net->bound_endpoint() << "\n"; }
  log_info("cluster " + snap.cluster_id + " listening on " + net->bound_endpoint() + " (run dir " + opt.run_dir +
           ", example " + cfg->example + ", state " + snap.run_state + ", " +
           (net->secure() ? "CURVE with " + std::to_string(security->authorized.size()) + " authorized key(s)"
                          : "plain TCP") +
           ")");

  caf::actor_system_config sys_cfg;
  configure_actor_system(sys_cfg);
  caf::actor_system sys{sys_cfg};
  registry_deps deps{net.get(),
                     &reg_store,
                     &checkpoints,
                     &local,
                     &net->counters(),
                     opt.metrics_file.empty() ? opt.run_dir + "/metrics.jsonl" : opt.metrics_file,
                     net->bound_endpoint(),
                     net->secure(),
                     &routes,
                     cfg->digest.empty() ? std::string() : model_copy(opt.run_dir),
                     hooks.fenced};
  const auto keeper_name = keeper_id(head_keeper_number);
  auto keeper = sys.spawn(keeper_actor, static_cast<transport*>(net.get()), keeper_name, snap.cluster_id, &checkpoints);
  local.add(keeper_name, keeper);
  auto registry = sys.spawn(registry_actor, deps, snap);
  local.add(registry_id(), registry);
  std::unique_ptr<head_http> http;
  if (!opt.http.empty()) {
    auto started = start_http(sys, registry, opt);
    if (!started) {
      std::cerr << "atoll up: " << started.err().describe() << "\n";
      caf::anon_send_exit(registry, caf::exit_reason::user_shutdown);
      caf::anon_send_exit(keeper, caf::exit_reason::user_shutdown);
      net->stop();
      local.clear();
      return code_of(exit_status::config);
    }
    http = std::move(*started);
  }
  // Coordinators are placed on the nodes by the registry when training starts.
  if (hooks.serving_http) hooks.serving_http(http ? http->url() : std::string());
  const auto reason = wait_for_actor(sys, registry, hooks.stop);
  http.reset();
  caf::anon_send_exit(keeper, caf::exit_reason::user_shutdown);
  net->stop();
  local.clear();
  log_info("head stopped");
  // The registry stops itself with runtime_error when it cannot save its state (a head whose
  // lead ended): the run goes on, under another head.
  return reason && reason == caf::sec::runtime_error ? head_lost_its_lead : 0;
}

}  // namespace atl
