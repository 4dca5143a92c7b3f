#include "storage/registry_store.hpp"

#include <nlohmann/json.hpp>

#include "runtime/process/json_text.hpp"

namespace atl {
namespace {

// The data cursor's parts, each under its own key beside its header ("registry.data").
const std::string data_part_prefix = "registry.data/";

std::string member_key(std::uint32_t node_id) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "node/%08x", node_id);
  return buf;
}

nlohmann::json keeper_groups_json(const std::vector<keeper_group_record>& groups) {
  auto out = nlohmann::json::array();
  for (const auto& g : groups)
    out.push_back({{"replica_keeper", g.replica_keeper},
                   {"replica_keeper_number", g.replica_keeper_number},
                   {"second_replica_keeper", g.second_replica_keeper},
                   {"second_replica_keeper_number", g.second_replica_keeper_number},
                   {"incoming_keeper", g.incoming_keeper},
                   {"incoming_keeper_number", g.incoming_keeper_number},
                   {"incoming_for", g.incoming_for},
                   {"incoming_spreading", g.incoming_spreading}});
  return out;
}

keeper_group_record keeper_group_of(const nlohmann::json& j) {
  keeper_group_record g;
  g.replica_keeper = j.value("replica_keeper", std::string());
  g.second_replica_keeper = j.value("second_replica_keeper", std::string());
  g.replica_keeper_number = j.value("replica_keeper_number", std::uint32_t{1});
  g.second_replica_keeper_number = j.value("second_replica_keeper_number", std::uint32_t{2});
  g.incoming_keeper = j.value("incoming_keeper", std::string());
  g.incoming_keeper_number = j.value("incoming_keeper_number", std::uint32_t{0});
  g.incoming_for = j.value("incoming_for", std::uint32_t{0});
  g.incoming_spreading = j.value("incoming_spreading", false);
  return g;
}

}  // namespace

status registry_store::save(const registry_snapshot& snap, std::size_t* members_written) {
  nlohmann::json meta = {{"cluster_id", snap.cluster_id},
                         {"epoch", snap.epoch},
                         {"next_node_id", snap.next_node_id},
                         {"next_rank", snap.next_rank},
                         {"run_state", snap.run_state},
                         {"placements", snap.placements},
                         {"finished", snap.finished},
                         {"keeper_groups", keeper_groups_json(snap.keeper_groups)},
                         {"next_keeper_number", snap.next_keeper_number}};
  std::vector<kv_write> batch;
  batch.push_back({column::meta, "registry", json_text(meta)});
  // The run's config and model signature (kilobytes, set once) only when they changed.
  const bool run_changed =
      !stored_run_ || stored_run_->first != snap.config_toml || stored_run_->second != snap.model_signature;
  if (run_changed)
    batch.push_back({column::meta, "registry.run",
                     json_text({{"config_toml", snap.config_toml}, {"model_signature", snap.model_signature}})});
  // The data cursor (its own records, as it grows with the chunks leased): its header and
  // each part when they changed, and the parts it no longer has erased.
  const bool cursor_changed = snap.data_cursor != stored_data_cursor_;
  if (cursor_changed) batch.push_back({column::meta, "registry.data", snap.data_cursor});
  std::vector<const std::pair<const std::string, std::string>*> parts_changed;
  std::vector<std::string> parts_gone;
  for (const auto& part : snap.data_cursor_parts) {
    const auto stored = stored_data_cursor_parts_.find(part.first);
    if (stored != stored_data_cursor_parts_.end() && stored->second == part.second) continue;
    parts_changed.push_back(&part);
    batch.push_back({column::meta, data_part_prefix + part.first, part.second});
  }
  for (const auto& [key, _] : stored_data_cursor_parts_) {
    if (snap.data_cursor_parts.count(key)) continue;
    parts_gone.push_back(key);
    batch.push_back({column::meta, data_part_prefix + key, {}, true});
  }
  std::vector<const member_record*> changed;
  for (const auto& m : snap.members) {
    const auto stored = stored_.find(m.node_id);
    if (stored != stored_.end() && stored->second == m) continue;
    changed.push_back(&m);
    nlohmann::json j = {{"node_id", m.node_id},
                        {"state", m.state},
                        {"hostname", m.hostname},
                        {"pid", m.pid},
                        {"devices", m.devices},
                        {"workers", m.workers},
                        {"ranks", m.ranks},
                        {"can_keep", m.can_keep},
                        {"data_endpoint", m.data_endpoint},
                        {"public_key", m.public_key}};
    batch.push_back({column::members, member_key(m.node_id), json_text(j)});
  }
  if (auto st = store_.commit(batch)) return st;
  for (const auto* m : changed) stored_[m->node_id] = *m;
  if (run_changed) stored_run_.emplace(snap.config_toml, snap.model_signature);
  if (cursor_changed) stored_data_cursor_ = snap.data_cursor;
  for (const auto* part : parts_changed) stored_data_cursor_parts_[part->first] = part->second;
  for (const auto& key : parts_gone) stored_data_cursor_parts_.erase(key);
  written_.saves++;
  written_.members += changed.size();
  for (const auto& w : batch) written_.bytes += w.key.size() + w.value.size();
  if (members_written) *members_written = changed.size();
  return {};
}

expected<std::optional<registry_snapshot>> registry_store::load() {
  auto meta = store_.get(column::meta, "registry");
  if (!meta) return meta.err();
  if (!*meta) return std::optional<registry_snapshot>{};
  registry_snapshot snap;
  try {
    auto j = nlohmann::json::parse(**meta);
    snap.cluster_id = j.at("cluster_id").get<std::string>();
    // The run's config: in its own record, or in this one (a store from before that).
    auto run = j;
    if (!j.contains("config_toml")) {
      auto stored_run = store_.get(column::meta, "registry.run");
      if (!stored_run) return stored_run.err();
      if (!*stored_run) return make_error(errc::storage_failure, "registry record without its run record");
      run = nlohmann::json::parse(**stored_run);
    }
    snap.config_toml = run.at("config_toml").get<std::string>();
    snap.model_signature = run.value("model_signature", std::string());
    snap.epoch = j.at("epoch").get<std::uint64_t>();
    snap.next_node_id = j.at("next_node_id").get<std::uint32_t>();
    snap.next_rank = j.at("next_rank").get<std::uint32_t>();
    snap.run_state = j.at("run_state").get<std::string>();
    if (j.contains("placements")) snap.placements = j.at("placements").get<std::vector<std::string>>();
    if (j.contains("finished")) snap.finished = j.at("finished").get<std::vector<std::string>>();
    // A store from before keeper groups has one group's fields at the top level, and one
    // from before hand-overs no numbers (the places were keeper/1 and /2).
    if (j.contains("keeper_groups")) {
      snap.keeper_groups.clear();
      for (const auto& g : j.at("keeper_groups")) snap.keeper_groups.push_back(keeper_group_of(g));
      if (snap.keeper_groups.empty()) return make_error(errc::storage_failure, "registry record without keeper groups");
    } else {
      snap.keeper_groups = {keeper_group_of(j)};
    }
    snap.next_keeper_number = j.value("next_keeper_number", std::uint32_t{3});
    auto data = store_.get(column::meta, "registry.data");
    if (!data) return data.err();
    if (*data) snap.data_cursor = **data;
    auto parts = store_.scan(column::meta, data_part_prefix);
    if (!parts) return parts.err();
    for (auto& [key, value] : *parts)
      snap.data_cursor_parts.emplace(key.substr(data_part_prefix.size()), std::move(value));
    auto rows = store_.scan(column::members, "node/");
    if (!rows) return rows.err();
    for (const auto& [key, value] : *rows) {
      auto m = nlohmann::json::parse(value);
      member_record r;
      r.node_id = m.at("node_id").get<std::uint32_t>();
      r.state = m.at("state").get<std::string>();
      r.hostname = m.at("hostname").get<std::string>();
      r.pid = m.at("pid").get<std::uint32_t>();
      r.devices = m.at("devices").get<std::vector<std::string>>();
      r.workers = m.at("workers").get<std::vector<std::string>>();
      if (m.contains("ranks")) r.ranks = m.at("ranks").get<std::vector<std::uint32_t>>();
      r.can_keep = m.value("can_keep", false);
      r.data_endpoint = m.value("data_endpoint", std::string());
      r.public_key = m.value("public_key", std::string());
      snap.members.push_back(std::move(r));
    }
    stored_.clear();
    for (const auto& m : snap.members) stored_[m.node_id] = m;
    stored_run_.emplace(snap.config_toml, snap.model_signature);
    stored_data_cursor_ = snap.data_cursor;
    stored_data_cursor_parts_ = snap.data_cursor_parts;
  } catch (const nlohmann::json::exception& e) {
    return make_error(errc::storage_failure, std::string("corrupt registry record: ") + e.what());
  }
  return std::optional<registry_snapshot>{std::move(snap)};
}

}  // namespace atl
