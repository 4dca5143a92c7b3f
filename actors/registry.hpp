#pragma once
// Registry actor ("registry"): the membership authority of a cluster (like Ray's GCS).
//
// Run states (persisted):  waiting --min_workers registered--> training
//                          training --no active node has a worker still training--> finished
// Node states:             active --atoll leave--> draining --Goodbye or lease--> left
//                          active --Goodbye (SIGTERM, down, finished)--> left
//                          active --lease expired with work left--> dead
//                          dead/left --Heartbeat--> refused (stale_epoch): it registers again
// Each change of state starts a new epoch, re-places the coordinators of gone nodes and
// publishes the Membership (active workers still training, and the quorum a round needs).
//
// - Training starts: the coordinator of fragment p is placed on the p-th live node
//   (PlaceCoordinator, repeated every heartbeat interval until the coordinator's
//   MembershipRequest confirms it runs); coordinators are sent the Membership of each epoch.
// - Hello -> node id, one worker slot (id, rank) per device, the run config, epoch + 1,
//   saved to RocksDB in one synced batch before the Welcome is sent. A Hello that names a
//   known node id (a node that reconnects after a head restart) gets its old slots back.
// - The Membership goes to every placed coordinator at each change and again every
//   heartbeat interval (one lost with a dropped link is repaired).
// - Each live node has a local lease proxy actor that the registry monitors. A Heartbeat
//   renews it; after cluster.lease_ms without one it goes down, which marks the node dead
//   (or left, if its work was done or it was draining): the epoch grows and coordinators
//   drop its workers from open rounds.
// - Progress, EvalReport, WorkerDone, RoundAck (workers) and RoundReport (coordinators) go
//   to the metrics file and to the answers of atollctl (ControlRequest -> ControlReply JSON).
// - ControlRequest "down" sends Shutdown to every live node, then stops the head;
//   "leave N" drains node N.
#include <chrono>
#include <map>
#include <optional>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/config.hpp"
#include "runtime/metrics.hpp"
#include "runtime/transport.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/registry_store.hpp"

namespace atl {

struct registry_deps {
  transport* net = nullptr;
  registry_store* store = nullptr;
  checkpoint_store* checkpoints = nullptr;
  const directory* local_actors = nullptr;
  traffic_counters* counters = nullptr;
  std::string metrics_path;
  std::string listen_endpoint;
  bool secure = false;  // CURVE on the head's socket
};

struct worker_view {
  std::string id;
  std::uint32_t node_id = 0;
  std::uint32_t rank = 0;
  std::string device;
  std::uint64_t step = 0;
  float loss = 0;
  float tokens_per_s = 0;
  std::uint64_t bytes_sent = 0, bytes_received = 0;
  bool done = false;
  float final_val_loss = -1;
  float wall_s = 0;
  float wait_s = 0;  // blocked on outer results
  std::uint64_t rounds_acked = 0;  // results it merged (RoundAck): it takes part
};

struct node_view {
  member_record record;
  std::chrono::steady_clock::time_point last_seen;
  std::chrono::steady_clock::time_point since;  // of the current state
  std::vector<std::uint64_t> refused;           // per errc code, from its last heartbeat
  std::uint64_t handshakes_failed = 0;
  caf::actor proxy;  // its lease proxy while active or draining (actors/lease_proxy.hpp)
  // For `atollctl members`: an active node is "joining" until its first heartbeat after
  // the Welcome, "syncing" until each of its workers has acknowledged a round, then active.
  bool heard = false;
  std::optional<std::chrono::steady_clock::time_point> synced_at;
};

struct fragment_view {
  std::string placed_on;  // "node/N" hosting the coordinator; empty until placed
  bool confirmed = false; // the coordinator asked for membership: it runs
  std::uint64_t round = 0;
  std::uint64_t digest = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> worker_digests;  // worker -> (round, digest)
};

struct registry_state {
  registry_deps deps;
  std::unique_ptr<mailer> mail;
  registry_snapshot snap;
  run_config cfg;
  std::map<std::uint32_t, node_view> nodes;
  std::map<std::string, worker_view> workers;
  std::vector<fragment_view> fragments;
  metrics_writer metrics;
  std::int64_t last_eval_step = -1;
  float last_val_loss = -1;
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  static inline const char* name = "registry";
};

caf::behavior registry_actor(caf::stateful_actor<registry_state>* self, registry_deps deps, registry_snapshot snap);


}  // namespace atl
