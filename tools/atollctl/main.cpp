// atollctl: inspect a running cluster through the head's control protocol.
#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "runtime/transport/control_client.hpp"

namespace {

using json = nlohmann::json;

std::string str(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {  // tables show 4 significant digits; --json has them all
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", v.get<double>());
    return buf;
  }
  if (v.is_null()) return "-";
  return v.dump();
}

void print_table(const json& rows, const std::vector<std::string>& columns) {
  std::vector<std::size_t> width(columns.size());
  for (std::size_t c = 0; c < columns.size(); ++c) width[c] = columns[c].size();
  for (const auto& r : rows)
    for (std::size_t c = 0; c < columns.size(); ++c)
      width[c] = std::max(width[c], str(r.value(columns[c], json())).size());
  for (std::size_t c = 0; c < columns.size(); ++c)
    std::cout << columns[c] << std::string(width[c] - columns[c].size() + 2, ' ');
  std::cout << "\n";
  for (const auto& r : rows) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const auto s = str(r.value(columns[c], json()));
      std::cout << s << std::string(width[c] - s.size() + 2, ' ');
    }
    std::cout << "\n";
  }
}

// Per committed round, what `atoll export` writes: the rows are (fragment, round) records
// of the keeper; a round is exportable on its own when every fragment holds it.
void print_checkpoints(const json& rows) {
  std::map<std::uint64_t, json> by_round;
  std::string latest;
  for (const auto& r : rows) {
    auto& round = by_round[r["round"].get<std::uint64_t>()];
    if (round.is_null()) round = {{"round", r["round"]}, {"fragments", ""}, {"digests", ""}, {"params", 0}};
    const std::string sep = round["fragments"].get<std::string>().empty() ? "" : ",";
    round["fragments"] = round["fragments"].get<std::string>() + sep + str(r["fragment"]);
    round["digests"] = round["digests"].get<std::string>() + sep + str(r["digest"]);
    round["params"] = round["params"].get<std::uint64_t>() + r["params"].get<std::uint64_t>();
    round["export"] = r.value("round_complete", false) ? "atoll export --round " + str(r["round"]) : "- (partial)";
    if (r.value("latest", false))
      latest +=
          (latest.empty() ? "" : ", ") + std::string("fragment ") + str(r["fragment"]) + " round " + str(r["round"]);
  }
  json table = json::array();
  for (const auto& [round, row] : by_round) table.push_back(row);
  print_table(table, {"round", "fragments", "params", "digests", "export"});
  std::cout << "atoll export (no --round) writes: " << (latest.empty() ? "nothing yet" : latest) << "\n";
}

// What the head's keeper holds on disk (snapshots and the round log, bounded by
// storage.keep_rounds and storage.snapshot_every): the status view's `storage`.
void print_keeper_storage(const json& storage) {
  if (!storage.contains("stored_bytes")) return;
  std::cout << "head's keeper: " << str(storage["snapshots"]) << " snapshot(s) and " << str(storage["log_records"])
            << " round record(s) on disk, " << str(storage["stored_bytes"]) << " B; "
            << str(storage.value("logged_bytes", json(0))) << " B of round inputs logged since it started\n";
}

// Up to `listed_rows` members and workers as tables; past that (a thousand nodes), their
// counts by state and the steps' range, and how to list them.
constexpr std::size_t listed_rows = 20;

void print_members_and_workers(const json& body) {
  const auto& members = body["members"];
  const auto& workers = body["workers"];
  if (members.size() <= listed_rows && workers.size() <= listed_rows) {
    std::cout << "\nmembers\n";
    print_table(members, {"node_id", "state", "workers", "batch_job"});
    std::cout << "\nworkers\n";
    print_table(workers, {"id", "rank", "step", "loss", "tokens_per_s", "threads", "bytes_sent", "done"});
    return;
  }
  // Counted by the head (the reply lists at most views::status_rows of each).
  std::cout << "\nmembers: " << str(body["members_total"]);
  for (const auto& [state, n] : body["member_states"].items()) std::cout << "  " << state << " " << str(n);
  const auto& steps = body["worker_steps"];
  std::cout << "\nworkers: " << str(body["workers_total"]) << "  steps " << str(steps["least"]) << " to "
            << str(steps["most"]) << "  done " << str(steps["done"])
            << "\n(atollctl members --state S --limit N --offset K lists them)\n";
}

// The run's progress through its data (the data cursor at the head).
void print_data(const json& body) {
  if (body.contains("error")) std::cout << "DATA CURSOR DAMAGED: " << str(body["error"]) << "\n";
  if (!body.value("leasing", false)) {
    std::cout << "no worker has leased data yet\n";
    return;
  }
  const auto epochs = body.value("epoch_limit", 0L);
  std::cout << "epoch " << str(body["epoch"]) << (epochs > 0 ? " of " + std::to_string(epochs) : std::string(""))
            << "  units " << str(body["units"]) << " (leased " << str(body["chunk"]) << " at a time)\n"
            << "consumed " << str(body["consumed"]) << "  in flight " << str(body["in_flight"]) << "  returned "
            << str(body["returned"]) << "  learned in part " << str(body["partial"])
            << (body.value("finished", false) ? "  (every epoch ended)" : "") << "\n";
  if (!body["chunks"].empty()) print_table(body["chunks"], {"epoch", "index", "state", "holder", "begin", "end"});
}

void print_human(const std::string& command, const json& body) {
  if (command == "status") {
    std::cout << "cluster " << str(body["cluster_id"]) << "  state " << str(body["state"]) << "  epoch "
              << str(body["epoch"]) << "  example " << str(body["example"]) << "  head " << str(body["head"]) << "\n";
    // The conditions that hold, each with its reason and message (an older head sends none).
    for (const auto& c : body.value("conditions", json::array()))
      if (c.value("status", false))
        std::cout << str(c["type"]) << " (" << str(c["reason"]) << ")"
                  << (c.value("message", "").empty() ? "" : ": " + c["message"].get<std::string>()) << "\n";
    const auto& ev = body["last_eval"];
    if (ev["step"].get<long>() >= 0)
      std::cout << "held-out loss " << str(ev["val_loss"]) << " at step " << str(ev["step"]) << "\n";
    print_members_and_workers(body);
    // With sharded rounds (diloco.shards) each row is a unit: one slice of a fragment.
    const auto& units = body["fragments"];
    const bool sliced = !units.empty() && units[0].contains("slice");
    std::cout << "\n"
              << (sliced ? "fragments in " + str(units[0]["shards"]) + " slices, a unit each" : "fragments") << "\n";
    if (sliced) print_table(units, {"id", "fragment", "slice", "round", "coordinator", "placed_on"});
    else print_table(units, {"id", "round", "coordinator"});
    // With keeper groups each replica keeps the units of its group (unit mod groups).
    const auto& keepers = body["keepers"];
    const bool grouped = keepers.size() > 1 && keepers[1].contains("group");
    std::cout << "\nkeepers (commits: whether every commit waits for it" << (grouped ? "; group: unit mod groups" : "")
              << ")\n";
    if (grouped) print_table(keepers, {"id", "on", "commits", "group"});
    else print_table(keepers, {"id", "on", "commits"});
    if (const auto& link = body.value("head_link", json::object()); link.contains("bytes_in"))
      std::cout << "\nhead link: in " << str(link["bytes_in"]) << " B, out " << str(link["bytes_out"])
                << " B (tensor frames in " << str(link.value("tensor_bytes_in", json(0))) << " B, out "
                << str(link.value("tensor_bytes_out", json(0))) << " B); relayed between nodes "
                << str(link["bytes_relayed"]) << " B (tensor frames " << str(link["tensor_bytes_relayed"]) << " B)\n";
    const auto& sec = body["security"];
    std::cout << "\nlinks: " << (sec.value("curve", false) ? "CURVE" : "plain TCP");
    if (sec.value("curve", false))
      std::cout << "  clients admitted " << str(sec["auth_admitted"]) << "  denied " << str(sec["auth_denied"]);
    std::cout << "  failed handshakes " << str(sec.value("handshakes_failed", json(0))) << "\n";
    const auto& storage = body["storage"];
    if (!storage.value("ok", true)) std::cout << "STORAGE FAILING: " << str(storage["last_error"]) << "\n";
    else if (storage.value("failed_commits", 0) > 0)
      std::cout << "storage: ok again after " << str(storage["failed_commits"])
                << " failed commit(s); last: " << str(storage["last_error"]) << "\n";
    print_keeper_storage(storage);
    std::cout << "refused messages:";
    if (body["refused"]["total"].empty()) std::cout << " none";
    for (const auto& [process, counts] : body["refused"].items())
      if (process != "total") std::cout << "\n  " << process << "  " << counts.dump();
    std::cout << "\n";
  } else if (command == "members") {
    print_table(body,
                {"node_id", "state", "since_s", "last_heartbeat_s", "hostname", "pid", "batch_job", "link", "workers"});
  } else if (command == "actors") {
    print_table(body, {"id", "process", "state"});
  } else if (command == "fragments") {
    for (const auto& f : body) {
      // With sharded rounds each row is a unit: one slice of a fragment.
      const std::string label = f.contains("slice") ? "unit " + str(f["id"]) + " (fragment " + str(f["fragment"]) +
                                                          ", slice " + str(f["slice"]) + " of " + str(f["shards"]) + ")"
                                                    : "fragment " + str(f["id"]);
      std::cout << label << "  round " << str(f["round"]) << "  coordinator " << str(f["coordinator"]) << "  keeper "
                << str(f.value("keeper", json())) << " digest " << str(f.value("keeper_digest", json("-"))) << "\n";
      print_table(f["workers"], {"id", "round", "digest"});
    }
  } else if (command == "checkpoints") {
    print_checkpoints(body);
  } else if (command == "data") {
    print_data(body);
  } else if (command == "explain") {
    for (const auto& f : body) {
      std::cout << "fragment " << str(f["fragment"]) << "  round " << str(f["round"]) << "  " << str(f["phase"])
                << "  waiting for " << str(f["waiting_for"]) << " since " << str(f["since_s"]) << " s\n  "
                << str(f["text"]) << "\n";
      if (!f["missing"].empty())
        print_table(f["missing"], {"id", "node_id", "node_state", "last_heartbeat_s", "step", "done"});
    }
  }
}

std::string head_from_run_dir(const std::string& dir) {
  for (const auto& p : {dir + "/head.endpoint", dir + "/head/head.endpoint"}) {
    std::ifstream in(p);
    std::string ep;
    if (std::getline(in, ep) && !ep.empty()) return ep;
  }
  return {};
}

// `atoll local` keeps its throw-away keys in RUN_DIR/keys; `atoll up` users may too.
std::string keys_from_run_dir(const std::string& dir) {
  for (const auto& p : {dir + "/keys", dir + "/../keys"})
    if (std::ifstream(p + "/head.pub")) return p;
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "atollctl: inspect a running Atoll cluster.\n"
      "The head is found from --head, else --run-dir (reads head.endpoint), else $ATOLL_HEAD.\n"
      "Keys: --keys DIR, else RUN_DIR/keys when --run-dir has them, else $ATOLL_KEYS; none means plain TCP."};
  std::string head, run_dir, keys_dir, client_key;
  bool as_json = false;
  int timeout_ms = 5000;
  app.add_option("--head", head,
                 "the head's endpoint, e.g. tcp://127.0.0.1:7070; heads that fail over: all of them, comma-separated "
                 "(the leader answers)");
  app.add_option("--run-dir", run_dir, "a run dir of `atoll up` or `atoll local`");
  app.add_option("--keys", keys_dir, "the cluster's key folder (`atoll keygen`)");
  app.add_option("--client-key", client_key, "a client key file other than KEYS/client.key");
  app.add_flag("--json", as_json, "print the head's JSON answer");
  app.add_option("--timeout", timeout_ms, "milliseconds to wait for the head")
      ->capture_default_str()
      ->check(CLI::Range(1, 3600000));
  app.require_subcommand(1);
  std::string command;
  const std::vector<std::pair<std::string, std::string>> commands = {
      {"status", "cluster id, epoch, run state, members, workers, fragments, refusal counters"},
      {"members", "nodes with state, since when, last heartbeat, workers"},
      {"actors", "every actor: the head's and each node's"},
      {"fragments",
       "per fragment (per slice with diloco.shards): round, keeper digest of theta_global, each "
       "worker's digest"},
      {"checkpoints", "committed rounds stored by the keeper, and what `atoll export` writes of them"},
      {"explain",
       "per fragment, what its round waits for and since when: who has contributed, who has not "
       "(node state, heartbeat, step), and what rule ends the wait"},
      {"data",
       "the run's data cursor: the epoch, units consumed by committed rounds, in flight, returned and "
       "learned in part, and each chunk still leased or waiting for a lease"},
      {"watch", "status every second until interrupted"}};
  std::string argument;
  std::string member_state;
  long member_limit = 0, member_offset = 0;
  for (const auto& [name, help] : commands) {
    auto* sub = app.add_subcommand(name, help);
    sub->add_flag("--json", as_json, "print the head's JSON answer");
    sub->callback([&command, name = name] { command = name; });
    if (name == "explain") sub->add_option("--fragment", argument, "only this fragment");
    if (name == "members") {
      sub->add_option("--state", member_state,
                      "only members in this state (joining, syncing, active, draining, left, "
                      "dead)");
      sub->add_option("--limit", member_limit, "at most this many (0: all)")->check(CLI::Range(0, 999999999));
      sub->add_option("--offset", member_offset, "skip this many first (node-id order)")
          ->check(CLI::Range(0, 999999999));
    }
  }
  CLI11_PARSE(app, argc, argv);
  // The head parses and checks the query (actors/decisions/member_query.hpp).
  if (command == "members") {
    const auto add = [&argument](const std::string& part) { argument += (argument.empty() ? "" : ",") + part; };
    if (!member_state.empty()) add("state=" + member_state);
    if (member_offset > 0) add("offset=" + std::to_string(member_offset));
    if (member_limit > 0) add("limit=" + std::to_string(member_limit));
  }
  if (head.empty() && !run_dir.empty()) head = head_from_run_dir(run_dir);
  if (head.empty() && std::getenv("ATOLL_HEAD")) head = std::getenv("ATOLL_HEAD");
  if (head.empty()) {
    std::cerr << "atollctl: no head given (use --head tcp://HOST:PORT, --run-dir DIR or ATOLL_HEAD)\n";
    return 2;
  }
  if (keys_dir.empty() && !run_dir.empty()) keys_dir = keys_from_run_dir(run_dir);
  if (keys_dir.empty() && std::getenv("ATOLL_KEYS")) keys_dir = std::getenv("ATOLL_KEYS");
  atl::link_security security;
  if (!keys_dir.empty()) {
    auto loaded = atl::load_client_security(keys_dir, client_key);
    if (!loaded) {
      std::cerr << "atollctl: " << loaded.err().describe() << "\n";
      return 2;
    }
    security = *loaded;
  }
  const bool watch = command == "watch";
  do {
    auto reply = atl::control_request(head, watch ? "status" : command, argument, std::chrono::milliseconds(timeout_ms),
                                      security);
    if (!reply) {
      std::cerr << "atollctl: " << reply.err().describe() << "\n";
      return 1;
    }
    auto body = json::parse(reply->json, nullptr, false);
    if (body.is_discarded()) {
      std::cerr << "atollctl: the head answered with invalid JSON\n";
      return 1;
    }
    if (!reply->ok) {
      std::cerr << "atollctl: " << str(body.value("error", json("request failed"))) << "\n";
      return 1;
    }
    if (as_json) std::cout << body.dump(2) << "\n";
    else print_human(watch ? "status" : command, body);
    if (!as_json && command == "checkpoints") {  // and what they take on the keeper's disk
      auto status = atl::control_request(head, "status", "", std::chrono::milliseconds(timeout_ms), security);
      if (status && status->ok) {
        auto parsed = json::parse(status->json, nullptr, false);
        if (!parsed.is_discarded()) print_keeper_storage(parsed.value("storage", json::object()));
      }
    }
    if (watch) {
      std::cout << std::string(40, '-') << std::endl;
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  } while (watch);
  return 0;
}
