#pragma once
// The registry's durable state: cluster id, run config, membership epoch, node ids,
// coordinator placements and members. Saved in one synced batch at every membership change,
// so a restarted head resumes exactly where the last change left it. A batch holds the
// registry's record and what changed since the last save or load of the members and of the
// run's record (its config and model signature): a join at a thousand nodes writes one
// member, not a thousand, and not the config again.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "storage/kv_store.hpp"

namespace atl {

struct member_record {
  std::uint32_t node_id = 0;
  std::string state;  // "active", "left", "dead"
  std::string hostname;
  std::uint32_t pid = 0;
  std::vector<std::string> devices;
  std::vector<std::string> workers;
  std::vector<std::uint32_t> ranks;  // of each worker (data shard and seed)
  bool can_keep = false;  // has a data dir: may host a keeper replica
  std::string data_endpoint;  // where peers send it tensors; empty: relayed by the head
  std::string public_key;  // the CURVE key it said Hello with; its ids speak only with it

  bool operator==(const member_record& o) const {
    return node_id == o.node_id && state == o.state && hostname == o.hostname && pid == o.pid && devices == o.devices &&
           workers == o.workers && ranks == o.ranks && can_keep == o.can_keep && data_endpoint == o.data_endpoint &&
           public_key == o.public_key;
  }
  bool operator!=(const member_record& o) const { return !(*this == o); }
};

// One keeper group's places: keeper/<number> on "node/N" ("" while none), the second used
// with storage.keepers = nodes. A hand-over gives a place a new number, since the old and
// the new replica run side by side for a while.
struct keeper_group_record {
  std::string replica_keeper;
  std::uint32_t replica_keeper_number = 1;
  std::string second_replica_keeper;
  std::uint32_t second_replica_keeper_number = 2;
  // A hand-over in progress: keeper/<incoming_keeper_number> on incoming_keeper takes place
  // incoming_for (1: the first, 2: the second) once caught up. incoming_for 0: none.
  std::string incoming_keeper;
  std::uint32_t incoming_keeper_number = 0;
  std::uint32_t incoming_for = 0;
  bool incoming_spreading = false;  // it moves the place off a node another group uses
  bool operator==(const keeper_group_record& o) const {
    return replica_keeper == o.replica_keeper && replica_keeper_number == o.replica_keeper_number &&
           second_replica_keeper == o.second_replica_keeper &&
           second_replica_keeper_number == o.second_replica_keeper_number && incoming_keeper == o.incoming_keeper &&
           incoming_keeper_number == o.incoming_keeper_number && incoming_for == o.incoming_for &&
           incoming_spreading == o.incoming_spreading;
  }
};

struct registry_snapshot {
  std::string cluster_id;
  std::string config_toml;
  std::uint64_t epoch = 0;
  std::uint32_t next_node_id = 1;
  std::uint32_t next_rank = 0;
  std::string run_state = "waiting";  // waiting, training, finished
  // "node/N" hosting the coordinator of fragment p at index p ("" until placed): a restarted
  // head finds its coordinators where they run instead of placing a second one.
  std::vector<std::string> placements;
  std::vector<std::string> finished;  // workers that finished their steps: no round waits for them
  // The replica keepers' places, a group of two per share of the sync units (unit u is kept
  // by group u mod keeper_groups.size()); one group unless the head sized them at the run's
  // start (actors/decisions/keeper_groups.hpp). Numbers are unique across groups.
  std::vector<keeper_group_record> keeper_groups = {keeper_group_record{}};
  std::uint32_t next_keeper_number = 3;  // the next replica placed (a hand-over's, a new group's) takes this one
  std::vector<member_record> members;
  // run.example = external: the first node's model signature, which every later node must
  // match (runtime/core/model_signature.hpp); empty until a node brings one.
  std::string model_signature;
  // The run's data cursor in its stored form (actors/shared/cursor_record.hpp), opaque
  // here; empty until a worker first leases data. A header and its parts (by key), each its
  // own record: a save writes the parts that changed and erases the ones gone, so that its
  // bytes follow what changed, not the run's history (a store written before parts has the
  // whole record in data_cursor and none).
  std::string data_cursor;
  std::map<std::string, std::string> data_cursor_parts;
};

class registry_store {
 public:
  explicit registry_store(kv_store& store) : store_(store) {}
  // Writes the run's record and each member that differs from what this store last saved
  // or loaded; nothing is remembered when the batch fails. Returns how many members it wrote
  // through `members_written` when given (for tests and the scale bench).
  status save(const registry_snapshot& snap, std::size_t* members_written = nullptr);
  expected<std::optional<registry_snapshot>> load();

  // What the saves that succeeded wrote since this store was made (`atollctl status`,
  // and the scale bench's writes and bytes per epoch).
  struct write_counts {
    std::uint64_t saves = 0;  // batches, one per save
    std::uint64_t members = 0;  // member records in them
    std::uint64_t bytes = 0;  // keys and values
  };
  write_counts written() const { return written_; }

 private:
  kv_store& store_;
  write_counts written_;
  std::map<std::uint32_t, member_record> stored_;  // as on disk after the last save or load
  std::optional<std::pair<std::string, std::string>> stored_run_;  // config_toml, model_signature, likewise
  std::string stored_data_cursor_;  // likewise
  std::map<std::string, std::string> stored_data_cursor_parts_;  // likewise
};

}  // namespace atl
