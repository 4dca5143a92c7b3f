// `atoll export`: theta_global of a committed round, read from the keepers' stores (the
// head's in a run dir, and the replicas' beside it), written as a file PyTorch loads. Works
// beside a running head (the stores are opened read-only) and after the run stopped.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "actors/shared/cursor_record.hpp"
#include "actors/shared/data_ledger.hpp"
#include "head/head_election.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/core/model_signature.hpp"
#include "runtime/transport/model_transfer.hpp"
#include "storage/checkpoint_rounds.hpp"
#include "storage/etcd_store.hpp"
#include "storage/registry_store.hpp"
#include "tools/atoll/processes.hpp"
#include "training/tasks.hpp"

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
  std::string ledger;  // with --ledger: the data ledger of the exported rounds, as JSON
};

// A keeper's store opened read-only: the head's, or a replica's.
struct keeper_source {
  std::string path;
  std::unique_ptr<kv_store> db;
  std::unique_ptr<checkpoint_store> checkpoints;
};

// The replicas' stores: those named, and every NODE/keeper-N under the run dir (`atoll
// local` gives each node RUN_DIR/nodeK). A named one that is not a store is an error; one
// found by looking that will not open (a node still writing its first files) is skipped,
// with a line on stderr, since the rounds it holds are then not considered.
expected<std::vector<keeper_source>> open_replicas(const export_options& opt, const run_config& cfg) {
  std::vector<std::pair<std::string, bool>> paths;  // path, named by the user
  for (const auto& dir : opt.keeper_dirs) paths.emplace_back(dir, true);
  std::error_code ec;
  for (const auto& node : fs::directory_iterator(opt.run_dir, ec)) {
    if (!node.is_directory()) continue;
    for (const auto& sub : fs::directory_iterator(node.path(), ec))
      if (sub.is_directory() && sub.path().filename().string().rfind("keeper-", 0) == 0)
        paths.emplace_back(sub.path().string(), false);
  }
  std::vector<keeper_source> out;
  for (const auto& [path, named] : paths) {
    auto db = open_store(path);
    if (!db) {
      if (named) return make_error(db.err().code, "--keeper-dir " + path + ": " + db.err().describe());
      std::cerr << "atoll export: skipped " << path << ": " << db.err().describe() << "\n";
      continue;
    }
    keeper_source source{path, std::move(*db), nullptr};
    source.checkpoints = std::make_unique<checkpoint_store>(*source.db, static_cast<std::uint64_t>(cfg.keep_rounds));
    out.push_back(std::move(source));
  }
  return out;
}

// The run's config and every keeper's store: the head's first, then the replicas'.
struct run_stores {
  run_config cfg;
  std::string head_dir;
  std::string model_signature;  // run.example = external: the model's, from the registry
  std::string data_cursor;  // the run's data cursor, stored form; empty: no worker leased data
  std::map<std::string, std::string> data_cursor_parts;  // and its parts (cursor_record.hpp)
  std::vector<keeper_source> sources;
};

// The run's snapshot from etcd (--registry: heads that fail over keep it there).
expected<std::optional<registry_snapshot>> snapshot_in_etcd(const std::string& url) {
  auto where = parse_etcd_registry(url);
  if (!where) return where.err();
  auto store = make_etcd_store(where->endpoints, where->root, {});  // read only: no term needed
  return registry_store(*store).load();
}

expected<run_stores> open_run(const export_options& opt) {
  auto head_dir = head_dir_of(opt.run_dir);
  // With the registry in etcd, a head's store is one keeper among others, and may be gone.
  if (!head_dir && opt.registry.empty()) return head_dir.err();
  std::unique_ptr<kv_store> head_db;
  if (head_dir) {
    auto db = open_store(*head_dir + "/db");
    if (!db) return db.err();
    head_db = std::move(*db);
  }
  auto snap = opt.registry.empty() ? registry_store(*head_db).load() : snapshot_in_etcd(opt.registry);
  if (!snap) return snap.err();
  if (!*snap)
    return make_error(errc::not_ready, (opt.registry.empty() ? *head_dir : opt.registry) + " holds no run yet");
  auto cfg = parse_config_text((*snap)->config_toml, "stored config");
  if (!cfg) return cfg.err();
  run_stores run{*cfg,
                 head_dir ? *head_dir : opt.run_dir,
                 (*snap)->model_signature,
                 (*snap)->data_cursor,
                 (*snap)->data_cursor_parts,
                 {}};
  if (head_db) {
    run.sources.push_back({*head_dir + "/db", std::move(head_db), nullptr});
    run.sources.back().checkpoints =
        std::make_unique<checkpoint_store>(*run.sources.back().db, static_cast<std::uint64_t>(cfg->keep_rounds));
  }
  auto replicas = open_replicas(opt, *cfg);
  if (!replicas) return replicas.err();
  for (auto& r : *replicas) run.sources.push_back(std::move(r));
  return run;
}

// Every (fragment, round) any keeper holds, keys only: no value is read.
expected<std::vector<checkpoint_summary>> stored_rounds(const run_stores& run) {
  std::vector<checkpoint_summary> stored;
  for (const auto& source : run.sources) {
    auto rounds = source.checkpoints->stored_rounds();
    if (!rounds) return make_error(rounds.err().code, source.path + ": " + rounds.err().describe());
    stored.insert(stored.end(), rounds->begin(), rounds->end());
  }
  return stored;
}

// The data ledger of the rounds `chosen` holds (actors/shared/data_ledger.hpp), as JSON text.
expected<std::string> ledger_of(const run_stores& run, const std::vector<checkpoint_summary>& chosen) {
  if (run.data_cursor.empty())
    return make_error(errc::not_ready, "the run has no data ledger: no worker has leased data from its cursor");
  auto snap = decode_cursor_parts(run.data_cursor, run.data_cursor_parts);
  if (!snap) return make_error(snap.err().code, "the run's data cursor: " + snap.err().describe());
  auto whole = data::data_cursor::restore(*snap);  // refuses a record that does not hold together
  if (!whole) return make_error(whole.err().code, "the run's data cursor: " + whole.err().describe());
  std::vector<std::uint64_t> rounds(static_cast<std::size_t>(sync_units(run.cfg)), 0);
  for (const auto& s : chosen)
    if (s.fragment < rounds.size()) rounds[s.fragment] = s.round;
  return data_ledger(*snap, static_cast<std::uint64_t>(run.cfg.seed), rounds,
                     static_cast<std::uint32_t>(shards_of(run.cfg)))
      .dump(1);
}

expected<exported> write_export(const export_options& opt, const std::string& tmp) {
  auto run = open_run(opt);
  if (!run) return run.err();
  const run_config& cfg = run->cfg;
  auto stored = stored_rounds(*run);
  if (!stored) return stored.err();
  auto chosen = choose_export(*stored, static_cast<std::size_t>(sync_units(cfg)), opt.round);
  if (!chosen) return chosen.err();
  exported out{cfg, {}, 0, {}};
  if (!opt.ledger.empty()) {  // before any value is read: a ledger that cannot be made writes nothing
    auto ledger = ledger_of(*run, *chosen);
    if (!ledger) return ledger.err();
    out.ledger = std::move(*ledger);
  }
  std::vector<std::vector<float>> theta;
  for (const auto& s : *chosen) {
    std::optional<fragment_checkpoint> cp;  // from the first store that still holds it
    for (const auto& source : run->sources) {
      auto loaded = source.checkpoints->load(s.fragment, s.round);
      if (!loaded) return make_error(loaded.err().code, source.path + ": " + loaded.err().describe());
      if (*loaded) {
        cp = std::move(**loaded);
        break;
      }
    }
    if (!cp)
      return make_error(errc::not_ready, "fragment " + std::to_string(s.fragment) + " round " +
                                             std::to_string(s.round) + " was pruned while reading; run again");
    theta.push_back(std::move(cp->theta));
    out.params += theta.back().size();
    out.fragments.push_back({s.fragment, s.round, cp->epoch,
                             digest64(theta.back().data(), theta.back().size() * sizeof(float)), theta.back().size()});
  }
  // Sharded rounds store each fragment's S slices as units p * S + s, in order: the
  // fragment is their concatenation.
  if (shards_of(cfg) > 1) {
    const auto shards = static_cast<std::size_t>(shards_of(cfg));
    std::vector<std::vector<float>> whole(theta.size() / shards);
    for (std::size_t u = 0; u < theta.size(); ++u)
      whole[u / shards].insert(whole[u / shards].end(), theta[u].begin(), theta[u].end());
    theta = std::move(whole);
  }
  std::string model_file;
  if (!cfg.digest.empty()) {  // a --model run: the head's copy of the module
    model_file = run->head_dir + "/model.pt";
    auto digest = file_digest(model_file);
    if (!digest) return digest.err();
    if (*digest != cfg.digest)
      return make_error(errc::model_mismatch,
                        model_file + " is not the run's model (digest " + *digest + ", the run's " + cfg.digest + ")");
  }
  if (auto err = cfg.example == external_example ? export_external_model(cfg, run->model_signature, theta, tmp)
                                                 : export_model(cfg, model_file, theta, tmp))
    return err;
  return out;
}

// `--list`: every stored round of every fragment, with the stores that hold it (from the
// records' references, no value file read, so it is quick beside a training run). Rounds
// held with different digests by two stores would be a broken invariant: they are listed
// apart, so a reader sees both.
int list_rounds(const export_options& opt) {
  auto run = open_run(opt);
  if (!run) {
    std::cerr << "atoll export: " << run.err().describe() << "\n";
    return 2;
  }
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>, std::vector<std::string>> held;
  for (const auto& source : run->sources) {
    auto rounds = source.checkpoints->list();
    if (!rounds) {
      std::cerr << "atoll export: " << source.path << ": " << rounds.err().describe() << "\n";
      return 2;
    }
    for (const auto& c : *rounds) held[{c.fragment, c.round, c.digest}].push_back(source.path);
  }
  json rows = json::array();
  for (const auto& [key, stores] : held)
    rows.push_back({{"fragment", std::get<0>(key)},
                    {"round", std::get<1>(key)},
                    {"digest", digest_hex(std::get<2>(key))},
                    {"stores", stores}});
  if (opt.as_json) {
    std::cout << rows.dump(2) << "\n";
    return 0;
  }
  std::cout << "fragment  round  digest            stores\n";
  for (const auto& r : rows) {
    std::cout << r["fragment"].get<std::uint32_t>() << "         " << r["round"].get<std::uint64_t>() << "      "
              << r["digest"].get<std::string>() << "  ";
    for (std::size_t i = 0; i < r["stores"].size(); ++i)
      std::cout << (i ? ", " : "") << r["stores"][i].get<std::string>();
    std::cout << "\n";
  }
  return 0;
}

}  // namespace

int run_export(const export_options& opt) {
  if (opt.list) return list_rounds(opt);
  if (opt.out.empty()) {
    std::cerr << "atoll export: --out FILE is required (or --list)\n";
    return 2;
  }
  if (fs::exists(opt.out) && !opt.force) {
    std::cerr << "atoll export: " << opt.out << " exists (give --force to overwrite it)\n";
    return 2;
  }
  if (!opt.ledger.empty() && fs::exists(opt.ledger) && !opt.force) {
    std::cerr << "atoll export: " << opt.ledger << " exists (give --force to overwrite it)\n";
    return 2;
  }
  // Written beside the targets and renamed: a failed export leaves no half file behind.
  const std::string tmp = opt.out + ".tmp-" + std::to_string(::getpid());
  const std::string ledger_tmp = opt.ledger + ".tmp-" + std::to_string(::getpid());
  auto done = write_export(opt, tmp);
  std::error_code ec;
  std::string failed;  // the file that could not be written
  if (done && !opt.ledger.empty()) {
    std::ofstream(ledger_tmp) << done->ledger << "\n";
    if (!fs::exists(ledger_tmp) || fs::file_size(ledger_tmp, ec) != done->ledger.size() + 1) failed = opt.ledger;
  }
  if (done && failed.empty()) fs::rename(tmp, opt.out, ec);
  if (done && failed.empty() && ec) failed = opt.out;
  if (done && failed.empty() && !opt.ledger.empty()) {
    fs::rename(ledger_tmp, opt.ledger, ec);
    if (ec) failed = opt.ledger;
  }
  if (!done || !failed.empty()) {
    fs::remove(tmp, ec);
    fs::remove(ledger_tmp, ec);
    std::cerr << "atoll export: " << (done ? "cannot write " + failed : done.err().describe()) << "\n";
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
  // With sharded rounds each entry is a sync unit: slice s of fragment p, its own round and
  // digest, its values from `first` in the fragment (the slices are in order).
  const auto shards = static_cast<std::size_t>(shards_of(done->cfg));
  std::size_t first = 0;
  for (const auto& f : done->fragments) {
    json entry = {{"id", f.fragment}, {"round", f.round}, {"digest", digest_hex(f.digest)}, {"params", f.params}};
    if (shards > 1) {
      if (f.fragment % shards == 0) first = 0;
      entry["fragment"] = f.fragment / shards;
      entry["slice"] = f.fragment % shards;
      entry["first"] = first;
      first += f.params;
    }
    manifest["fragments"].push_back(std::move(entry));
  }
  if (!opt.ledger.empty()) manifest["ledger"] = opt.ledger;
  if (opt.as_json) {
    std::cout << manifest.dump(2) << "\n";
    return 0;
  }
  std::cout << "wrote " << opt.out << ": " << done->params << " parameters of " << done->cfg.example << ", ";
  for (std::size_t i = 0; i < done->fragments.size(); ++i)
    std::cout << (i ? ", " : "") << "fragment " << done->fragments[i].fragment << " round " << done->fragments[i].round;
  std::cout << "\nload it in Python with: " << load << "\n";
  if (!opt.ledger.empty()) std::cout << "the data it learned, per epoch, fragment and round: " << opt.ledger << "\n";
  return 0;
}

}  // namespace atl
