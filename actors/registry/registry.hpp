#pragma once
// Registry actor ("registry"): the membership authority of a cluster (like Ray's GCS). A
// shell over pure decisions, each with its diagram and tests:
//   actors/decisions/membership.hpp  node lifecycle (joining -> syncing -> active -> draining ->
//                          left | dead); actors/decisions/run_phase.hpp the run's phase
//                          (waiting -> training -> finished)
//   actors/decisions/placement.hpp   where coordinators and the replica keepers run
//   actors/decisions/quorum.hpp      the quorum a round needs (published with every Membership)
//   actors/decisions/data_cursor.hpp which data each worker trains on, and what rounds took
// Its files are layered, top down; each calls only the layers below it, never a file
// beside it (tools/check/layering.sh holds every include to this drawing):
//   registry.cpp                      the shell: state restored, each message to its handler
//   control nodes reports data .cpp   handlers: one family of messages each
//   lifecycle.cpp                     a node's move applied; what a change of members sets off
//   phase.cpp                         the run's phase applied
//   placements.cpp                    placements and keeper hand-overs applied
//   cursor.cpp                        the data cursor applied and saved
//   outbox.cpp                        outputs: the snapshot persisted, Membership, routes,
//                                     placements and Shutdown sent
//   state.hpp, queries, views         what it knows, and the answers of atollctl from it
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
