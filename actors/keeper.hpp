#pragma once
// Checkpoint keeper actor ("keeper/N"): stores committed fragment state in RocksDB
// (storage/checkpoint_store) and serves it.
//
// Protocol: CommitRequest(fragment, round; tensors theta, momentum)
//             -> synced WriteBatch -> CommitAck(ok, digest)  (ok=false with the error)
//           LoadRequest(fragment) -> LoadReply(found, round; tensors theta, momentum)
// A commit is acknowledged only after the write is on disk; a failed write leaves the
// previous round as the latest and is reported, never acknowledged. The same round again
// with the same bytes is acknowledged (a retry whose ack was lost). A commit from an epoch
// older than the newest coordinator that loaded or committed here is refused
// (stale_epoch): that coordinator was re-placed.
//
// Replica ("keeper/1" on a node, placed by the registry): the coordinators commit to it as
// well and release a round only when every keeper acknowledged it. On start it catches up:
//   catching_up --LoadRequest(p) to its source, every second, for each fragment not yet
//                answered--> LoadReply(p) from the source -> committed here (if newer)
//   caught up: every fragment answered, or committed here by its coordinator (commits are
//   taken all along, and a committed round is the newest: the source is not asked again)
// A LoadReply from anyone but its source, or after catching up, is refused.
//
// Chunks (a worker resyncing a large fragment): ChunkRequest(fragment, round, offset,
// count) -> ChunkReply(found; the values, at most 4M of them). The round's record is
// decoded once and kept while it is asked for.
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/transport.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/kv_store.hpp"

namespace atl {

// A replica's own database, owned by its keeper actor for as long as it runs.
struct keeper_storage {
  std::unique_ptr<kv_store> db;
  std::unique_ptr<checkpoint_store> checkpoints;
};

struct keeper_state {
  std::unique_ptr<mailer> mail;
  checkpoint_store* store = nullptr;
  std::shared_ptr<keeper_storage> owned;  // a replica's storage; empty for the head's keeper
  std::string source;  // a replica catches up from this keeper
  std::set<std::uint32_t> missing;  // fragments it has not heard about from the source
  std::optional<fragment_checkpoint> served;  // the round whose chunks were asked for last
  std::map<std::uint32_t, std::uint64_t> writer_epoch;  // newest coordinator epoch per fragment
  std::set<std::uint32_t> epoch_loaded;  // fragments whose stored epoch is in writer_epoch
  static inline const char* name = "keeper";
};

caf::behavior keeper_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                           std::string cluster_id, checkpoint_store* store);

// A replica keeper on `storage`, catching up the `fragments` fragments from `source`.
caf::behavior keeper_replica_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                                   std::string cluster_id, std::shared_ptr<keeper_storage> storage, std::string source,
                                   std::uint32_t fragments);

}  // namespace atl
