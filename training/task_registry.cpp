#include <fstream>
#include <map>
#include <stdexcept>

#include "runtime/core/model_signature.hpp"
#include "training/task.hpp"
#include "training/tasks.hpp"

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

error error_of(const std::exception& e) {
  if (const auto* typed = dynamic_cast<const task_error*>(&e)) return typed->err;
  if (dynamic_cast<const std::invalid_argument*>(&e)) return make_error(errc::invalid_config, e.what());
  return make_error(errc::bad_model, e.what());
}

bool register_task(const std::string& name, task_factory factory) {
  registry()[name] = std::move(factory);
  return true;
}

std::unique_ptr<task> make_task(const run_config& cfg, const replica_spec& spec) {
  if (cfg.example == external_example && spec.model_file.empty())
    throw task_error(make_error(errc::invalid_config,
                                "run.example = external: the model is the Python nodes' own (atoll.DiLoCo); a C++ "
                                "node trains it from --model FILE.pt, the same module in TorchScript"));
  // A C++ node of an external run trains the Python nodes' model as TorchScript.
  auto it = registry().find(cfg.example == external_example ? std::string("torchscript") : cfg.example);
  if (it == registry().end())
    throw task_error(make_error(errc::invalid_config, "unknown example '" + cfg.example + "'"));
  return it->second(cfg, spec);
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, _] : registry()) names.push_back(name);
  return names;
}

bool has_task(const std::string& name) { return registry().count(name) != 0; }

std::string data_dir(const run_config& cfg) { return cfg.data_dir.empty() ? ATOLL_SOURCE_DATA_DIR : cfg.data_dir; }

std::string default_data_file(const run_config& cfg) { return data_dir(cfg) + "/tinyshakespeare.txt"; }

void module_task::save(const std::string& path) {
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
  for (const auto& p : module().named_parameters()) tensors.emplace_back(p.key(), p.value());
  for (const auto& b : module().named_buffers()) tensors.emplace_back(b.key(), b.value());
  save_state_dict(tensors, path);
}

void save_state_dict(const std::vector<std::pair<std::string, torch::Tensor>>& tensors, const std::string& path) {
  c10::Dict<std::string, torch::Tensor> state;
  for (const auto& [name, t] : tensors) state.insert(name, t.detach().to(torch::kCPU));
  const auto bytes = torch::pickle_save(c10::IValue(state));
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw task_error(make_error(errc::storage_failure, "cannot write " + path));
}

}  // namespace atl
