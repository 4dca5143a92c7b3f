#pragma once
// Checkpoint keeper actor ("keeper/N"): stores committed fragment state in RocksDB
// (storage/checkpoint_store) and serves it.
//
// Protocol: CommitRequest(fragment, round; tensors theta, momentum)
//             -> synced WriteBatch -> CommitAck(ok, digest)  (ok=false with the error)
//           LoadRequest(fragment) -> LoadReply(found, round; tensors theta, momentum)
// A commit is acknowledged only after the write is on disk; a failed write leaves the
// previous round as the latest and is reported, never acknowledged.
#include <caf/fwd.hpp>
#include <caf/stateful_actor.hpp>

#include "runtime/transport.hpp"
#include "storage/checkpoint_store.hpp"

namespace atl {

struct keeper_state {
  std::unique_ptr<mailer> mail;
  checkpoint_store* store = nullptr;
  static inline const char* name = "keeper";
};

caf::behavior keeper_actor(caf::stateful_actor<keeper_state>* self, transport* net, std::string id,
                           std::string cluster_id, checkpoint_store* store);

}  // namespace atl
