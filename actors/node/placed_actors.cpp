#include "actors/node/placed_actors.hpp"

#include <caf/all.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/keeper/keeper.hpp"
#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/process/log.hpp"
#include "storage/checkpoint_store.hpp"

namespace atl {

void placed_actors::confirm(caf::event_based_actor* self, const host& at, const std::string& id) const {
  const auto hosted = at.local->find(id);
  if (!hosted) return;
  if (is_kind(id, actor_kind::coordinator)) self->send(hosted, confirm_atom::value);
  else self->send(hosted, ready_atom::value);
}

void placed_actors::start_coordinator(caf::event_based_actor* self, const host& at, std::uint32_t fragment) {
  const auto id = coordinator_id(fragment);
  auto c = self->spawn(coordinator_actor, at.net, at.cluster, coordinator_config_for(*at.run, fragment));
  at.local->add(id, c);
  coordinators_.push_back(c);
  log_info("hosting " + id);
}

status placed_actors::start_keeper(caf::event_based_actor* self, const host& at, const std::string& id,
                                   std::uint32_t number, const std::string& source,
                                   const std::vector<std::uint32_t>& units, const std::string& data_dir,
                                   const store_opener& open) {
  const std::string path = data_dir + "/keeper-" + std::to_string(number);
  auto db = open ? open(path) : open_rocksdb_store(path);
  if (!db) {
    log_error("cannot host " + id + ": " + db.err().describe());
    return db.err();
  }
  auto storage = std::make_shared<keeper_storage>();
  storage->db = std::move(*db);
  storage->checkpoints = std::make_unique<checkpoint_store>(*storage->db, static_cast<std::size_t>(at.run->keep_rounds),
                                                            log_options_for(*at.run));
  auto k = self->spawn(keeper_replica_actor, at.net, id, at.cluster, storage, source,
                       static_cast<std::uint32_t>(sync_units(*at.run)), units);
  at.local->add(id, k);
  keepers_[id] = k;
  log_info("hosting " + id + " in " + path + ", catching up from " + source +
           (units.empty() ? std::string() : " (" + std::to_string(units.size()) + " units of its keeper group)"));
  return {};
}

bool placed_actors::stop_keeper(caf::event_based_actor* self, directory& local, const std::string& id) {
  const auto it = keepers_.find(id);
  if (it == keepers_.end()) return false;
  local.remove(id);
  self->send_exit(it->second, caf::exit_reason::user_shutdown);
  keepers_.erase(it);
  log_info("stopped " + id + ": the registry placed it elsewhere (its store stays)");
  return true;
}

void placed_actors::stop_all(caf::event_based_actor* self, directory& local) {
  for (const auto& id : local.ids())
    if (is_kind(id, actor_kind::coordinator) || is_kind(id, actor_kind::keeper)) local.remove(id);
  for (auto& c : coordinators_) self->send_exit(c, caf::exit_reason::user_shutdown);
  for (auto& [_, k] : keepers_) self->send_exit(k, caf::exit_reason::user_shutdown);
  coordinators_.clear();
  keepers_.clear();
}

}  // namespace atl
