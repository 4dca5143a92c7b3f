#pragma once
// Registry actor ("registry"): the membership authority of a cluster (like Ray's GCS). A
// thin shell: the decisions live apart from its I/O, each with its diagram and tests:
//   actors/decisions/membership.hpp  node lifecycle (joining -> syncing -> active -> draining ->
//                          left | dead) and run lifecycle (waiting -> training -> finished)
//   actors/decisions/placement.hpp   where coordinators and the replica keeper run
//   actors/decisions/quorum.hpp      the quorum a round needs (published with every Membership)
//   actors/registry/state.hpp  what it knows (nodes, workers, fragments, the run)
//   actors/registry/views.hpp  the answers of atollctl, from that state
//   actors/registry/reports.cpp  worker and coordinator reports -> views and metrics
//
// Each change of a node's state that changes who takes part starts a new epoch, persists
// the snapshot, re-places what ran on gone nodes and publishes the Membership (workers
// still training, the quorum, the keepers a commit needs).
//
// - Hello -> node id, one worker slot (id, rank) per device, the run config, epoch + 1,
//   saved to RocksDB in one synced batch before the Welcome is sent. A Hello that names a
//   known node id (a node that reconnects after a head restart) gets its old slots back.
// - Placements are persisted before anyone hears of them (a restarted head must not place
//   a second coordinator) and repeated every heartbeat interval until the coordinator's
//   MembershipRequest confirms it runs. The Membership goes to every placed coordinator at
//   each change and again every heartbeat interval (one lost with a dropped link is repaired).
// - Each node that hosts anything has a local lease proxy actor that the registry monitors.
//   A Heartbeat renews it; after cluster.lease_ms without one it goes down: the node is dead
//   (or left, if its work was done or it was draining), and coordinators drop its workers
//   from open rounds.
// - ControlRequest -> ControlReply JSON (atollctl); "down" sends Shutdown to every live node,
//   then stops the head; "leave N" drains node N.
// Time comes from the actor system's clock, so the deterministic scheduler can drive it.
#include <caf/stateful_actor.hpp>

#include "actors/registry/state.hpp"
#include "storage/registry_store.hpp"

namespace atl {

caf::behavior registry_actor(caf::stateful_actor<registry_state>* self, registry_deps deps, registry_snapshot snap);

}  // namespace atl
