#pragma once
// What a keeper actor holds (actors/keeper/keeper.hpp has its protocol): its store, the
// decisions' machine, the copies it follows. A header of its own so that the files beside
// the shell (follow.cpp) include the state, not the shell.
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <caf/actor_clock.hpp>

#include "actors/decisions/keeper_machine.hpp"
#include "runtime/transport/transport.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/kv_store.hpp"
#include "storage/round_record.hpp"

namespace atl {

// A replica's own database, owned by its keeper actor for as long as it runs.
struct keeper_storage {
  std::unique_ptr<kv_store> db;
  std::unique_ptr<checkpoint_store> checkpoints;
};

// A fragment's state as this keeper last reached it, kept to apply the next record to.
struct followed_fragment {
  std::uint64_t round = 0;
  std::uint64_t epoch = 0;
  outer_state state;
};

struct keeper_state {
  std::unique_ptr<mailer> mail;
  checkpoint_store* store = nullptr;
  std::shared_ptr<keeper_storage> owned;  // a replica's storage; empty for the head's keeper
  // The fence, the catch-up, the follow queue and the snapshot's turn
  // (actors/decisions/keeper_machine.hpp; its diagram there).
  keeper_machine machine;
  std::optional<fragment_checkpoint> served;  // the round whose chunks were asked for last
  std::map<std::uint32_t, followed_fragment> followed;
  // The records the machine queued to follow, in its order, each with the message whose
  // frames it points into: applied follow_delay after the first, or before anything that
  // reads the followed state, so that the apply's CPU does not compete with the round's release.
  std::vector<std::pair<wire::message_ptr, round_record>> to_follow;
  std::shared_ptr<snapshot_job> snapshot_writing;  // by a detached writer, one at a time
  record_scratch scratch;
  // The actor system's clock: steady time in production, simulated under the deterministic
  // scheduler.
  const caf::actor_clock* clock = nullptr;
  std::chrono::steady_clock::time_point now() const { return clock->now(); }
  static inline const char* name = "keeper";
};

}  // namespace atl
