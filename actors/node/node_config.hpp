#pragma once
// What a node agent is started with (actors/node/node_agent.hpp): its devices, how its
// workers' replicas are made, and the process's hooks.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker/replica.hpp"
#include "runtime/core/error.hpp"
#include "runtime/core/expected.hpp"
#include "runtime/core/thread_layout.hpp"
#include "runtime/process/config.hpp"
#include "runtime/process/health.hpp"
#include "runtime/transport/route_delta.hpp"
#include "storage/kv_store.hpp"

namespace atl {

struct node_agent_config {
  std::vector<std::string> devices = {"cpu"};
  std::string hostname;
  replica_factory factory;
  // Called once the run config is known, before any worker starts: sets the process's
  // thread counts, checks that the data and the model are usable here, and returns the
  // thread layouts each CPU worker tries over its first steps (runtime/core/thread_layout.hpp;
  // one: fixed, none: the process's). An error stops the node.
  std::function<expected<std::vector<thread_layout>>(const run_config&, std::size_t local_workers,
                                                     std::uint32_t world_size)>
      prepare;
  // Sets a thread layout on the calling thread (a CPU worker's own).
  std::function<void(const thread_layout&)> apply_threads;
  // Digest of this node's copy of the run's TorchScript model (model.digest); empty: none.
  std::string model_digest;
  // A model the head does not hold (run.example = external, the Python API): its
  // parameters, runtime/core/model_signature.hpp; empty: a built-in or TorchScript model.
  std::string model_signature;
  // Called with the reason when the node gives up (a refused model, a bad config, a worker
  // that failed too often), before it stops; for a process that embeds the node.
  std::function<void(const error&)> on_failure;
  // The scheduler's job this process runs in (runtime/process/batch_job.hpp); empty: none.
  std::string batch_job;
  // Where a keeper replica placed here keeps its RocksDB (`atoll join --run-dir`); empty:
  // this node hosts no keeper.
  std::string data_dir;
  // Where peers send this node tensors (runtime/transport/node_links.hpp); empty: the head relays them.
  std::string data_endpoint;
  // Called with each PeerTable from the registry that changed this node's table (the node's
  // links route by it). Null in processes without direct links.
  std::function<void(const routes_update&)> on_routes;
  // Opens the store of a keeper replica placed here, at `path` under data_dir; null: RocksDB.
  std::function<expected<std::unique_ptr<kv_store>>(const std::string& path)> open_keeper_store;
  // Workers run on threads of their own (a step blocks for seconds). False where every actor
  // must run on one scheduler: the seeded tier's simulated clock.
  bool detached_workers = true;
  // The process's probes (runtime/process/health.hpp): the agent beats on each tick and says
  // when it is a member; null: nobody asks.
  std::shared_ptr<process_health> health;
  // What the provisional id is made unique by before the Welcome; empty: 64 random bits. A
  // seeded test names its nodes, so that a seed replays with the same messages.
  std::string provisional_token;
};

}  // namespace atl
