// `atoll join`: a node process (node agent and its workers).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include <caf/all.hpp>

#include "actors/node/node_agent.hpp"
#include "actors/shared/messages.hpp"
#include "node/health_http.hpp"
#include "node/lifecycle.hpp"
#include "node/node_process.hpp"
#include "runtime/core/exit_status.hpp"
#include "runtime/device/codec_cuda.hpp"
#include "runtime/device/device.hpp"
#include "runtime/process/batch_job.hpp"
#include "runtime/process/health.hpp"
#include "runtime/process/log.hpp"
#include "runtime/transport/model_transfer.hpp"
#include "runtime/transport/node_links.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

// The devices must exist and be usable before the node registers: a worker that cannot
// start would only fail later, on every restart.
status check_devices(const std::vector<std::string>& devices) {
  std::string list;
  for (const auto& d : devices) list += (list.empty() ? "" : ",") + d;
  device_inventory inventory;
  const bool wants_cuda = list.find("cuda") != std::string::npos;
  if (wants_cuda) {  // CUDA is initialised only when asked for
    inventory.torch_cuda_devices = cuda_device_count();
    inventory.cuda_codecs = cuda_codecs_available();
    for (std::size_t i = 0; i < inventory.torch_cuda_devices; ++i) {
      auto memory = cuda_device_memory(static_cast<int>(i));
      inventory.free_bytes.push_back(memory ? memory->free_bytes : SIZE_MAX);  // unknown: LibTorch will tell
    }
  }
  auto planned = plan_devices(list, inventory);
  if (!planned) return planned.err();
  return {};
}

// The run's model on this node: --model's copy, or the head's, fetched into the run dir
// (or the temp dir) unless an identical copy is already there. Returns the local path and
// its digest; both empty when the run has no model file.
expected<std::pair<std::string, std::string>> local_model(const node_options& opt, const link_security& security,
                                                          process_health* health) {
  // With probes, a try lasts at most a third of the liveness grace: each try beats.
  const auto longest_try =
      health ? std::chrono::milliseconds(opt.liveness_grace_s * 1000 / 3) : std::chrono::milliseconds(10000);
  // The first request to the head: it may not be up yet (a batch job that started first).
  const auto wait = std::chrono::seconds(opt.wait_for_head_s);
  const auto started = std::chrono::steady_clock::now();
  // A try lasts at most 10 s, and at least three fit in the wait: each failed one is said.
  const auto each_try =
      std::min(longest_try, wait.count() > 0 ? std::clamp<std::chrono::milliseconds>(wait / 3, std::chrono::seconds(1),
                                                                                     std::chrono::seconds(10))
                                             : std::chrono::milliseconds(10000));
  model_source head{opt.head, security, each_try};
  expected<model_offer> offer = make_error(errc::timeout, "");
  for (;;) {
    if (health) health->beat(std::chrono::steady_clock::now());  // waiting is living
    offer = ask_for_model(head);
    if (offer || offer.err().code != errc::timeout) break;
    const auto waited = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started);
    if (wait.count() > 0 && waited >= wait)
      return make_error(errc::timeout, "no head answered at " + opt.head + " within " + std::to_string(wait.count()) +
                                           " s (--wait-for-head); is `atoll up` running there, with these keys?");
    log_warn("waiting for the head at " + opt.head + ": no answer for " + std::to_string(waited.count()) + " s" +
             (wait.count() > 0 ? " of " + std::to_string(wait.count()) : ""));
  }
  if (!offer) return offer.err();
  if (!opt.model_file.empty()) {
    auto digest = file_digest(opt.model_file);
    if (!digest) return digest.err();
    return std::make_pair(opt.model_file, *digest);
  }
  if (offer->digest.empty()) return std::make_pair(std::string(), std::string());
  const auto dir = opt.run_dir.empty() ? std::filesystem::temp_directory_path().string() : opt.run_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);  // `--run-dir` may not exist yet
  const auto dest = dir + "/model-" + offer->digest + ".pt";
  log_info("fetching the run's model (" + std::to_string(offer->bytes) + " bytes) from the head into " + dest);
  auto last_report = std::chrono::steady_clock::now();
  auto progress = [&](std::uint64_t done, std::uint64_t total) {
    if (health) health->beat(std::chrono::steady_clock::now());  // a chunk came: the fetch goes on
    if (std::chrono::steady_clock::now() - last_report < std::chrono::seconds(5) && done < total) return;
    last_report = std::chrono::steady_clock::now();
    log_info("model: " + std::to_string(done) + " of " + std::to_string(total) + " bytes");
  };
  if (auto err = fetch_model(head, *offer, dest, progress)) return err;
  return std::make_pair(dest, offer->digest);
}

// A node of a built-in or TorchScript run, once the run's config is known: plans the
// process's threads and each CPU worker's layouts, and checks the data and the model.
decltype(node_agent_config::prepare) prepare_cpu_run(const node_options& opt, const std::string& model_file) {
  const auto cpu_workers = static_cast<int>(std::count(opt.devices.begin(), opt.devices.end(), std::string("cpu")));
  return [forced_threads = opt.threads, cpu_workers, model_file](
             const run_config& run, std::size_t local_workers,
             std::uint32_t world_size) -> expected<std::vector<thread_layout>> {
    thread_plan_input in;
    in.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    in.local_workers = static_cast<int>(local_workers);
    in.cpu_workers = cpu_workers;
    in.process_threads = forced_threads;
    in.threads_per_worker = static_cast<int>(run.threads_per_worker);
    in.layout = run.thread_layout;
    auto plan = plan_threads(in);
    if (!plan) return plan.err();
    std::string layouts;
    for (const auto& l : plan->layouts) layouts += (layouts.empty() ? "" : ", ") + to_string(l);
    if (run.thread_layout != "auto") layouts += " (run.thread_layout)";
    log_info(describe(set_compute_threads(plan->budget)) + (plan->layouts.size() > 1 ? "; a CPU worker tries " + layouts
                                                            : plan->layouts.empty()  ? ""
                                                                                     : "; CPU workers use " + layouts));
    // The data (run.data must be on every node, at the same path) and the model, before
    // any worker starts: a worker that cannot be built would only fail on every restart.
    if (auto err = check_task(run, model_file, world_size, /*with_data=*/true)) return err;
    return plan->layouts;
  };
}

}  // namespace

int run_node(const node_options& opt, const external_node* external) {
  set_log_name("atoll node");
  warn_if_reference_blas();
  // Says why the node cannot start, to the terminal and to an embedding process; its exit
  // status by why (runtime/core/exit_status.hpp), unless the caller knows better.
  const auto fail = [external](const error& why, std::optional<exit_status> status = std::nullopt) {
    std::cerr << "atoll join: " << why.describe() << "\n";
    if (external && external->failure) external->failure(why);
    return code_of(status.value_or(exit_status_for(why.code)));
  };
  if (opt.head.empty()) return fail(make_error(errc::invalid_config, "--head tcp://HOST:PORT is required"));
  if (auto err = check_devices(opt.devices)) return fail(err, exit_status::config);
  auto security =
      resolve_link_security(link_side::client, opt.head, opt.keys_dir, opt.client_key, opt.insecure, "atoll join");
  if (!security) return fail(security.err(), exit_status::config);
  // The probes first: a node waiting for its head or fetching a large model is alive.
  std::shared_ptr<process_health> health;
  std::unique_ptr<health_http> probes;
  if (!opt.health.empty()) {
    health = std::make_shared<process_health>();
    auto served = health_http::start(opt.health, health, std::chrono::seconds(opt.liveness_grace_s));
    if (!served) return fail(served.err(), exit_status::config);
    probes = std::move(*served);
    log_info("probes at " + opt.health + " (GET /livez, /readyz)");
  }
  auto model = local_model(opt, *security, health.get());
  if (!model) {
    const bool no_head = model.err().code == errc::timeout;
    return fail(no_head ? model.err() : make_error(model.err().code, "the run's model: " + model.err().message));
  }
  directory local;
  cluster_identity cluster;
  std::unique_ptr<node_links> net;
  node_link_settings links;
  links.head = opt.head;
  links.security = *security;
  if (!opt.no_listen)
    links.listen = opt.listen.empty() ? "tcp://" + local_address_towards(opt.head) + ":0" : opt.listen;
  try {
    net = std::make_unique<node_links>(links, local, cluster);
  } catch (const zmq::error_t& e) {  // an address in use, say: another try may find it free
    return fail(make_error(errc::invalid_config, "cannot connect to " + opt.head +
                                                     (links.listen.empty() ? "" : " or listen on " + links.listen) +
                                                     ": " + e.what()),
                exit_status::retriable);
  }
  if (!links.listen.empty() && net->data_endpoint().empty())
    return fail(make_error(errc::invalid_config, "--listen " + links.listen + " is not tcp://HOST:PORT"));
  char host[256] = {0};
  ::gethostname(host, sizeof host - 1);
  node_agent_config nc;
  nc.health = health;
  if (!opt.run_dir.empty()) {  // this node may host a keeper replica there
    std::error_code ec;
    std::filesystem::create_directories(opt.run_dir, ec);
    if (ec)
      return fail(make_error(errc::storage_failure, "cannot create --run-dir " + opt.run_dir + ": " + ec.message()),
                  exit_status::config);
    nc.data_dir = opt.run_dir;
  }
  nc.devices = opt.devices;
  nc.hostname = host;
  const std::string model_file = model->first;
  nc.model_digest = model->second;
  nc.batch_job = describe_batch_job([](const char* name) { return std::getenv(name); });
  if (!nc.batch_job.empty()) log_info("in batch job " + nc.batch_job);
  // Why the node gave up, for its exit status (and for an embedding process).
  auto gave_up = std::make_shared<error>();
  nc.on_failure = [gave_up, external](const error& why) {
    *gave_up = why;
    if (external && external->failure) external->failure(why);
  };
  if (external) {
    // The user's own loop (the Python API): its replicas and model, and its process's
    // threads as the user set them (no prepare: nothing to plan or check here).
    nc.factory = external->factory;
    nc.model_signature = external->signature;
  } else {
    if (!opt.model_file.empty()) {  // in a run of Python nodes, the head judges the model by this
      auto signature = torchscript_signature(opt.model_file);
      if (!signature) return fail(signature.err(), exit_status::config);
      nc.model_signature = *signature;
    }
    nc.factory = torch_replica_factory(model_file);
    nc.prepare = prepare_cpu_run(opt, model_file);
    nc.apply_threads = [](const thread_layout& layout) { set_compute_threads(layout.torch, layout.blas); };
  }
  nc.data_endpoint = net->data_endpoint();
  node_links* routed = net.get();
  nc.on_routes = [routed](const routes_update& update) { routed->update_routes(update); };
  log_info(
      "connecting to " + opt.head + (net->secure() ? " (CURVE)" : " (plain TCP)") + "; tensors " +
      (nc.data_endpoint.empty() ? "relayed by the head (--no-listen)" : "direct, listening on " + nc.data_endpoint));

  caf::actor_system_config sys_cfg;
  configure_actor_system(sys_cfg);
  caf::actor_system sys{sys_cfg};
  auto agent = sys.spawn(node_agent_actor, static_cast<transport*>(net.get()), &local, &cluster, nc);
  const volatile bool* signalled = external ? nullptr : &install_stop_signals();
  const caf::error reason = external ? wait_for_actor(sys, agent, external->stop_requested)
                                     : wait_for_actor(sys, agent, [signalled] { return *signalled; });
  net->stop();
  local.clear();
  if (reason) {
    log_error("node failed: " + sys.render(reason));
    return code_of(*gave_up ? exit_status_for(gave_up->code) : exit_status::retriable);
  }
  // SIGTERM or SIGINT: the node left the run (drained), which is not its end.
  return code_of(signalled && *signalled ? exit_status::drained : exit_status::finished);
}

}  // namespace atl
