#pragma once
// What the registry placed on a node (PlaceCoordinator, PlaceKeeper): fragment
// coordinators and keeper replicas, children of the node agent, named in the node's
// directory. The agent decides whether it may host one (its phase, the run's units, a data
// dir); this runs the decision: spawns it, answers a repeated placement of one it hosts,
// stops them all.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/event_based_actor.hpp>

#include "runtime/core/expected.hpp"
#include "runtime/process/config.hpp"
#include "runtime/transport/transport.hpp"
#include "storage/kv_store.hpp"

namespace atl {

class placed_actors {
 public:
  // Where placed actors live: the node's transport and directory, the cluster and the run.
  struct host {
    transport* net = nullptr;
    directory* local = nullptr;
    std::string cluster;
    const run_config* run = nullptr;
  };
  // Opens a keeper replica's store at a path; null: RocksDB.
  using store_opener = std::function<expected<std::unique_ptr<kv_store>>(const std::string& path)>;

  // Whether `id` runs here. A repeated placement of it is answered by `confirm`: a
  // coordinator confirms itself to the registry (a restarted head may not know it runs), a
  // keeper reports ready once caught up (the registry may wait for it).
  bool hosts(const host& at, const std::string& id) const { return at.local->contains(id); }
  void confirm(caf::event_based_actor* self, const host& at, const std::string& id) const;

  void start_coordinator(caf::event_based_actor* self, const host& at, std::uint32_t fragment);
  // Keeper replica `number` (its id `id`) on a store at data_dir/keeper-<number>, catching
  // up from `source` the units its keeper group keeps (`units`; empty: every unit). The
  // store's error if it does not open (nothing is hosted then).
  status start_keeper(caf::event_based_actor* self, const host& at, const std::string& id, std::uint32_t number,
                      const std::string& source, const std::vector<std::uint32_t>& units, const std::string& data_dir,
                      const store_opener& open);

  // Stops keeper replica `id` (the registry placed it elsewhere; its store stays on disk),
  // out of the directory first. False if it does not run here.
  bool stop_keeper(caf::event_based_actor* self, directory& local, const std::string& id);

  // Takes them out of the directory first, so nothing more reaches or leaves them under
  // their ids once the registry may place them elsewhere, then stops them.
  void stop_all(caf::event_based_actor* self, directory& local);

  bool any() const { return !coordinators_.empty() || !keepers_.empty(); }
  bool any_keeper() const { return !keepers_.empty(); }
  const std::vector<caf::actor>& coordinators() const { return coordinators_; }

 private:
  std::vector<caf::actor> coordinators_;
  std::map<std::string, caf::actor> keepers_;  // the keeper replicas placed here, by id
};

}  // namespace atl
