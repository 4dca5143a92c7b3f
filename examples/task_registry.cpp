#include <map>
#include <stdexcept>

#include "examples/task.hpp"
#include "examples/tasks.hpp"

#ifndef ATOLL_SOURCE_DATA_DIR
#define ATOLL_SOURCE_DATA_DIR "examples/data"
#endif

namespace atl {
namespace {

std::map<std::string, task_factory>& registry() {
  static std::map<std::string, task_factory> tasks;
  return tasks;
}

}  // namespace

bool register_task(const std::string& name, task_factory factory) {
  registry()[name] = std::move(factory);
  return true;
}

std::unique_ptr<task> make_task(const run_config& cfg, const replica_spec& spec) {
  auto it = registry().find(cfg.example);
  if (it == registry().end()) throw std::invalid_argument("unknown example '" + cfg.example + "'");
  return it->second(cfg, spec);
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : registry()) names.push_back(name);
  return names;
}

bool has_task(const std::string& name) { return registry().count(name) != 0; }

std::string data_dir(const run_config& cfg) { return cfg.data_dir.empty() ? ATOLL_SOURCE_DATA_DIR : cfg.data_dir; }

}  // namespace atl
