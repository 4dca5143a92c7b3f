#pragma once
// The registry's state (actors/registry/registry.hpp): what it knows of nodes, workers, fragments
// and the run. Its own header so the views (actors/registry/views.hpp) and the registry's
// files read it without including the actor.
#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_clock.hpp>

#include "actors/decisions/coalesced_send.hpp"
#include "actors/decisions/data_cursor.hpp"
#include "actors/decisions/membership.hpp"
#include "actors/decisions/round_explain.hpp"
#include "actors/shared/membership_delta.hpp"
#include "runtime/process/config.hpp"
#include "runtime/process/metrics.hpp"
#include "runtime/transport/peer_routes.hpp"
#include "runtime/transport/transport.hpp"
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
  shared_routes* routes = nullptr;  // the head's copy of the PeerTable (its ingress checks senders with it)
  std::string model_file;  // the head's copy of model.file (runtime/transport/model_transfer.hpp); empty: none
  // The store is fenced by an election (etcd): a snapshot it refuses means this head no
  // longer leads, or cannot prove it does, so the registry falls silent and stops rather
  // than publish what a successor will not know. False (RocksDB): log and go on.
  bool stop_when_unsaved = false;
  // A heartbeat's lease counts from its arrival, measured on the real clock (how long it
  // waited in the mailbox). False where time is simulated (the seeded tier): a real wait
  // there is noise that would make a seed run two ways.
  bool lease_from_arrival = true;
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
  float wall_s = 0;
  float wait_s = 0;  // blocked on outer results
  std::string threads;  // a CPU worker's thread layout ("1x2", "trying 2x1"); empty on a GPU
  std::uint64_t rounds_acked = 0;  // results it merged (RoundAck): it takes part
};

struct node_view {
  member_state state = member_state::joining;  // actors/decisions/membership.hpp; record.state is its stored form
  member_record record;
  std::chrono::steady_clock::time_point last_seen;
  std::chrono::steady_clock::time_point since;  // of the current state
  std::vector<std::uint64_t> refused;  // per errc code, from its last heartbeat
  std::uint64_t handshakes_failed = 0;
  std::uint64_t worker_restarts = 0;  // from its last heartbeat
  caf::actor proxy;  // its lease proxy while it hosts anything (actors/registry/lease_proxy.hpp)
  bool shutdown_sent = false;  // draining: told to stop (held back while it hands a replica over)
  std::string batch_job;  // from its Hello, e.g. "slurm 1234.0" (not persisted: a restarted head hears it again)
  // The provisional id its Hello came from, until its first heartbeat: a Hello repeated
  // before the Welcome reached it gets the same Welcome, not a second node.
  std::string provisional_id;
};

struct fragment_view {
  std::string placed_on;  // "node/N" hosting the coordinator; empty until placed
  bool confirmed = false;  // the coordinator asked for membership: it runs
  // The coordinator placed there has been sent a whole Membership: from then on deltas.
  bool holds_membership = false;
  std::uint64_t round = 0;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> worker_digests;  // worker -> (round, digest)
  std::optional<round_progress> progress;  // the coordinator's last RoundProgress (`atollctl explain`)
  // The keeper's digest of its latest round, computed once per round: views are const and
  // asked every second by each open dashboard, and a fragment's values can be hundreds of MB.
  mutable std::optional<std::pair<std::uint64_t, std::uint64_t>> keeper_digest;  // (round, digest)
  // The last RoundReport's (round, digest): what every commit keeper acknowledged. Shown
  // instead of the head keeper's with storage.keepers = nodes (that keeper is behind).
  std::optional<std::pair<std::uint64_t, std::uint64_t>> released_digest;
  std::chrono::steady_clock::time_point progress_at;  // when it came
};

// Round durations (first contribution to release), for the Prometheus histogram.
struct duration_histogram {
  static constexpr std::array<double, 10> bounds = {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};  // seconds
  std::array<std::uint64_t, bounds.size()> at_most{};  // observations <= bounds[i]
  std::uint64_t count = 0;
  double sum = 0;
  void observe(double seconds) {
    for (std::size_t i = 0; i < bounds.size(); ++i)
      if (seconds <= bounds[i]) at_most[i]++;
    count++;
    sum += seconds;
  }
};

struct registry_state {
  registry_deps deps;
  std::unique_ptr<mailer> mail;
  registry_snapshot snap;  // what is persisted; written from the fields below by persist()
  run_phase phase = run_phase::waiting;
  run_config cfg;
  std::map<std::uint32_t, node_view> nodes;
  std::map<std::string, worker_view> workers;
  std::vector<fragment_view> fragments;
  // A replica keeper placed since the head started -> the keeper it catches up from (a
  // restarted head sends keeper/0: by then the replica runs and ignores the repeat).
  std::map<std::string, std::string> keeper_sources;
  // Each keeper group's hand-over in progress (snap.keeper_groups[g].incoming_*): when it
  // started, and whether its incoming replica reported its units' released rounds
  // (KeeperReady). One per keeper group.
  struct handover_progress {
    std::chrono::steady_clock::time_point since;
    bool incoming_ready = false;
  };
  std::vector<handover_progress> handovers;
  // The route table the nodes were last sent (runtime/transport/route_delta.hpp): each
  // change goes out as the difference from it, and heartbeats are checked against it.
  // Changes within route_publish_gap of the last sending wait for the next one (a burst of
  // joins is one delta, not one per join to every node).
  route_table published_routes;
  std::uint64_t published_digest = 0;  // routes_digest(published_routes)
  coalesced_send routes_sending;  // a routes_atom is on its way while due()
  // The same for the Membership the coordinators are sent (publish_membership).
  coalesced_send membership_sending;  // a members_atom is on its way while due()
  // New nodes whose Hello came since the last admission, with the provisional id each came
  // from: admitted together within admission_gap, one epoch and one write for all of them
  // (actors/registry/nodes.cpp, admit_new_nodes). Until then nothing is published of them.
  struct new_node {
    std::uint32_t id = 0;
    node_view node;
    std::vector<worker_view> workers;
    std::string provisional_id;
  };
  std::vector<new_node> admitting;
  // The Membership last sent to every coordinator: the next is sent as what changed since.
  std::optional<membership_view> published_members;
  std::uint64_t published_members_digest = 0;  // members_digest(*published_members)
  // Replica keepers that said they run (KeeperReady), by id, with the host they ran on then:
  // PlaceKeeper is repeated each tick only to a replica not confirmed where it is placed.
  std::map<std::string, std::string> keepers_confirmed;
  // Replicas the registry no longer places whose host stays (a spreading hand-over's old
  // replica, a cancelled one's incoming): DropKeeper to the host this many more ticks. A
  // drop that never arrives leaves an idle actor that nothing sends to (a restarted head
  // forgets them for that reason).
  struct keeper_drop {
    std::string host;
    int sends_left = 0;
  };
  std::map<std::string, keeper_drop> dropping;
  // The run's data cursor (actors/registry/cursor.cpp): none until a worker first leases data.
  // A stored one that does not load is kept out, and every lease refused with its error.
  std::optional<data::data_cursor> data;
  std::optional<error> data_damaged;
  duration_histogram round_durations;
  // For the run's conditions (actors/decisions/run_conditions.hpp): the last RoundReport, and
  // the last heartbeat that counted more worker restarts than its node's before.
  std::optional<std::chrono::steady_clock::time_point> last_round_at, last_worker_restart_at;
  metrics_writer metrics;
  std::int64_t last_eval_step = -1;
  float last_val_loss = -1;
  std::chrono::steady_clock::time_point started;
  // When every live worker was first seen done: the summary waits a little past it for
  // RoundReports still on their way (actors/decisions/run_phase.hpp).
  std::optional<std::chrono::steady_clock::time_point> workers_done_at;
  // The actor system's clock: steady time in production, simulated under the
  // deterministic scheduler of the protocol tests.
  const caf::actor_clock* clock = nullptr;
  std::chrono::steady_clock::time_point now() const { return clock->now(); }
  static inline const char* name = "registry";
};

}  // namespace atl
