#pragma once
// Checkpoint keeper actor ("keeper/N"): a follower of the fragments' coordinators. It
// stores committed rounds in RocksDB (storage/checkpoint_store: snapshots and the round
// log) and serves them.
//
// Protocol: CommitRequest(logged: the round's record)
//             -> CommitAck(writing) -> record appended (storage.sync) -> CommitAck(ok, digest)
//             -> then, off the coordinator's path: the record applied to this keeper's copy of
//                the fragment's state with the coordinator's step (apply_record), its theta
//                digest checked, and a snapshot written every storage.snapshot_every rounds
//           CommitRequest(not logged: round 0, tensors theta, momentum) -> a snapshot, synced
//           LoadRequest(fragment) -> LoadReply(found, round; theta, momentum[, residual])
// The apply waits follow_delay after the acknowledgement (the round's results are then
// being applied by the workers on the same cores), and always happens before this keeper
// reads its copy of a fragment's state for anything else. A snapshot is a copy of that
// state written and fdatasynced by a detached writer, so that the next record's append
// does not wait behind it, then named in the store when the writer says it is done (a
// snapshot due while another is being written is skipped: the log still holds its round).
// A store that keeps values inline (the protocol tests' in-memory one) writes it at once.
// A commit is acknowledged only once durable; a failed write leaves the previous round as
// the latest and is reported, never acknowledged. The same round again with the same
// digest is acknowledged (a retry whose ack was lost). A commit from an epoch older than
// the newest coordinator that loaded or committed here is refused (stale_epoch): that
// coordinator was re-placed. A record this keeper cannot follow (it holds no state, or an
// older round) is refused as not_ready and sent again by the coordinator, by which time a
// catching-up replica has the state. A record that replays to another digest is reported
// to the coordinator as digest_mismatch, and this keeper drops its copy of that state
// (the next record reloads it from the store, whose read checks every digest again).
//
// Replica ("keeper/N" on a node, placed by the registry): the coordinators commit to it as
// well and release a round only when every keeper acknowledged it. On start it catches up:
//   catching_up --LoadRequest(p) to its source, every second, for each fragment not yet
//                answered--> LoadReply(p) from the source -> committed here (if newer)
//   caught up: every fragment answered, or committed here by its coordinator (commits are
//   taken all along, and a committed round is the newest: the source is not asked again)
// A LoadReply from anyone but its source, or after catching up, is refused.
// Asked (ready_atom: its node got the registry's PlaceKeeper again), a caught-up replica
// tells the registry the newest round it holds of each fragment (KeeperReady): a
// hand-over's leaving host waits for that.
//
// The decisions above (the fence, the catch-up, the follow queue, one snapshot at a time)
// are keeper_machine's (actors/decisions/keeper_machine.hpp, each edge numbered and table-
// tested); this actor reads the store, sends the messages and keeps the followed copies.
//
// Chunks (a worker resyncing a large fragment): ChunkRequest(fragment, round, offset,
// count) -> ChunkReply(found; the values, at most 4M of them). The round's record is
// decoded once and kept while it is asked for.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/keeper/state.hpp"

namespace atl {

caf::behavior keeper_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                           std::string cluster_id, checkpoint_store* store);

// A replica keeper on `storage` of a run with `fragments` sync units, catching up from
// `source` the units of its keeper group (`kept`; empty: every unit).
caf::behavior keeper_replica_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                                   std::string cluster_id, std::shared_ptr<keeper_storage> storage, std::string source,
                                   std::uint32_t fragments, std::vector<std::uint32_t> kept);

}  // namespace atl
