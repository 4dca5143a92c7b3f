// `atoll export`: theta_global of a committed round, read from the head's store in a run
// dir, written as a file PyTorch loads. Works beside a running head (the store is opened
// read-only) and after the run stopped.
#include <unistd.h>

#include <filesystem>
#include <iostream>
#include <thread>

#include <nlohmann/json.hpp>

#include "examples/tasks.hpp"
#include "runtime/digest.hpp"
#include "runtime/model_transfer.hpp"
#include "storage/checkpoint_rounds.hpp"
#include "storage/registry_store.hpp"
#include "tools/atoll/processes.hpp"

namespace atl {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// The head's folder in a run dir: `atoll up --run-dir D` keeps D/db, `atoll local` D/head/db.
expected<std::string> head_dir_of(const std::string& run_dir) {
  for (const auto& dir : {run_dir, run_dir + "/head"})
    if (fs::is_directory(dir + "/db")) return dir;
  return make_error(errc::storage_failure, "no head store in " + run_dir + " (looked for " + run_dir + "/db and " +
                                               run_dir + "/head/db): give the run dir of `atoll up` or `atoll local`");
}

// Beside a writing head, RocksDB can remove a file between listing and opening it: retry.
expected<std::unique_ptr<kv_store>> open_store(const std::string& path) {
  expected<std::unique_ptr<kv_store>> db = make_error(errc::storage_failure, "");
  for (int attempt = 0; attempt < 5; ++attempt) {
    db = open_rocksdb_store_read_only(path);
    if (db) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return db;
}

struct exported {
  run_config cfg;
  std::vector<checkpoint_summary> fragments;
  std::size_t params = 0;
};

expected<exported> write_export(const export_options& opt, const std::string& tmp) {
  auto head_dir = head_dir_of(opt.run_dir);
  if (!head_dir) return head_dir.err();
  auto db = open_store(*head_dir + "/db");
  if (!db) return db.err();
  auto snap = registry_store(**db).load();
  if (!snap) return snap.err();
  if (!*snap) return make_error(errc::not_ready, *head_dir + " holds no run yet");
  auto cfg = parse_config_text((*snap)->config_toml, "stored config");
  if (!cfg) return cfg.err();
  exported out{*cfg, {}, 0};
  checkpoint_store checkpoints(**db, static_cast<std::uint64_t>(cfg->keep_rounds));
  auto stored = checkpoints.stored_rounds();  // keys only: just the chosen rounds are read
  if (!stored) return stored.err();
  auto chosen = choose_export(*stored, static_cast<std::size_t>(cfg->fragments), opt.round);
  if (!chosen) return chosen.err();
  std::vector<std::vector<float>> theta;
  for (const auto& s : *chosen) {
    auto cp = checkpoints.load(s.fragment, s.round);
    if (!cp) return cp.err();
    if (!*cp)
      return make_error(errc::not_ready, "fragment " + std::to_string(s.fragment) + " round " +
                                             std::to_string(s.round) + " was pruned while reading; run again");
    theta.push_back(std::move((*cp)->theta));
    out.params += theta.back().size();
    out.fragments.push_back({s.fragment, s.round, (*cp)->epoch,
                             digest64(theta.back().data(), theta.back().size() * sizeof(float)), theta.back().size()});
  }
  std::string model_file;
  if (!cfg->digest.empty()) {  // a --model run: the head's copy of the module
    model_file = *head_dir + "/model.pt";
    auto digest = file_digest(model_file);
    if (!digest) return digest.err();
    if (*digest != cfg->digest)
      return make_error(errc::model_mismatch,
                        model_file + " is not the run's model (digest " + *digest + ", the run's " + cfg->digest + ")");
  }
  if (auto err = export_model(*cfg, model_file, theta, tmp)) return err;
  return out;
}

}  // namespace

int run_export(const export_options& opt) {
  if (fs::exists(opt.out) && !opt.force) {
    std::cerr << "atoll export: " << opt.out << " exists (give --force to overwrite it)\n";
    return 2;
  }
  // Written beside the target and renamed: a failed export leaves no half file behind.
  const std::string tmp = opt.out + ".tmp-" + std::to_string(::getpid());
  auto done = write_export(opt, tmp);
  std::error_code ec;
  if (done) fs::rename(tmp, opt.out, ec);
  if (!done || ec) {
    fs::remove(tmp, ec);
    std::cerr << "atoll export: " << (done ? "cannot write " + opt.out + ": " + ec.message() : done.err().describe())
              << "\n";
    return done ? 1 : 2;
  }
  const bool torchscript = !done->cfg.digest.empty();
  const std::string load = torchscript ? "torch.jit.load(\"" + opt.out + "\")" : "torch.load(\"" + opt.out + "\")";
  json manifest = {{"file", opt.out},
                   {"format", torchscript ? "torchscript" : "state_dict"},
                   {"example", done->cfg.example},
                   {"params", done->params},
                   {"load", load},
                   {"fragments", json::array()}};
  for (const auto& f : done->fragments)
    manifest["fragments"].push_back(
        {{"id", f.fragment}, {"round", f.round}, {"digest", digest_hex(f.digest)}, {"params", f.params}});
  if (opt.as_json) {
    std::cout << manifest.dump(2) << "\n";
    return 0;
  }
  std::cout << "wrote " << opt.out << ": " << done->params << " parameters of " << done->cfg.example << ", ";
  for (std::size_t i = 0; i < done->fragments.size(); ++i)
    std::cout << (i ? ", " : "") << "fragment " << done->fragments[i].fragment << " round " << done->fragments[i].round;
  std::cout << "\nload it in Python with: " << load << "\n";
  return 0;
}

}  // namespace atl
