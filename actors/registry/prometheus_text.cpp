#include "actors/registry/prometheus_text.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>

namespace atl {
namespace {

using json = nlohmann::json;

// A label value with \, " and newline escaped, as the format requires.
std::string escaped(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string number(const json& v) {
  if (v.is_boolean()) return v.get<bool>() ? "1" : "0";
  if (!v.is_number()) return "NaN";
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v.get<double>());
  return buf;
}

class writer {
 public:
  // Starts a family: HELP and TYPE lines.
  void family(const std::string& name, const char* type, const char* help) {
    os_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void sample(const std::string& name, const std::map<std::string, std::string>& labels, const json& value) {
    os_ << name;
    if (!labels.empty()) {
      os_ << "{";
      bool first = true;
      for (const auto& [k, v] : labels) {
        os_ << (first ? "" : ",") << k << "=\"" << escaped(v) << "\"";
        first = false;
      }
      os_ << "}";
    }
    os_ << " " << number(value) << "\n";
  }
  std::string str() const { return os_.str(); }

 private:
  std::ostringstream os_;
};

void per_worker(writer& w, const json& status, const std::string& name, const char* type, const char* help,
                const char* field) {
  w.family(name, type, help);
  const auto workers = status.value("workers", json::array());
  for (const auto& worker : workers) w.sample(name, {{"worker", worker.value("id", "")}}, worker.value(field, json(0)));
}

// A field's number, 0 when absent or not a number (a NaN loss reads back as null).
double number_at(const json& object, const char* field) {
  const auto it = object.find(field);
  return it != object.end() && it->is_number() ? it->get<double>() : 0.0;
}

// The members as a few series whatever their number: the oldest heartbeat of a node that
// still takes part (a lease about to run out shows here), and restarts summed.
void member_summary(writer& w, const json& members) {
  double oldest = 0, restarts = 0;
  for (const auto& m : members) {
    const auto state = m.value("state", "");
    if (state != "dead" && state != "left") oldest = std::max(oldest, number_at(m, "last_heartbeat_s"));
    restarts += number_at(m, "worker_restarts");
  }
  w.family("atoll_member_heartbeat_age_seconds_max", "gauge",
           "the longest time since a live node's last heartbeat (the oldest lease)");
  w.sample("atoll_member_heartbeat_age_seconds_max", {}, oldest);
  w.family("atoll_worker_restarts_total", "counter", "worker restarts by the nodes' supervisors, summed");
  w.sample("atoll_worker_restarts_total", {}, restarts);
}

// The workers as a few series: the least and most steps taken, their mean loss, and their
// throughput and bytes summed.
void worker_summary(writer& w, const json& status) {
  const auto workers = status.value("workers", json::array());
  double least = 0, most = 0, loss = 0, tokens = 0, sent = 0, received = 0;
  bool first = true;
  for (const auto& worker : workers) {
    const double step = number_at(worker, "step");
    least = first ? step : std::min(least, step);
    most = first ? step : std::max(most, step);
    first = false;
    loss += number_at(worker, "loss");
    tokens += number_at(worker, "tokens_per_s");
    sent += number_at(worker, "bytes_sent");
    received += number_at(worker, "bytes_received");
  }
  w.family("atoll_workers", "gauge", "workers the head hears from");
  w.sample("atoll_workers", {}, workers.size());
  w.family("atoll_worker_step_min", "gauge", "the fewest inner steps a worker has taken");
  w.sample("atoll_worker_step_min", {}, least);
  w.family("atoll_worker_step_max", "gauge", "the most inner steps a worker has taken");
  w.sample("atoll_worker_step_max", {}, most);
  w.family("atoll_worker_loss_mean", "gauge", "the workers' last training losses, averaged");
  w.sample("atoll_worker_loss_mean", {}, workers.empty() ? 0.0 : loss / static_cast<double>(workers.size()));
  w.family("atoll_worker_tokens_per_second", "gauge", "the workers' training throughput, summed");
  w.sample("atoll_worker_tokens_per_second", {}, tokens);
  w.family("atoll_worker_sent_bytes_total", "counter", "bytes the workers sent, summed");
  w.sample("atoll_worker_sent_bytes_total", {}, sent);
  w.family("atoll_worker_received_bytes_total", "counter", "bytes the workers received, summed");
  w.sample("atoll_worker_received_bytes_total", {}, received);
}

}  // namespace

std::string prometheus_text(const json& status, const json& members, metrics_detail detail) {
  writer w;
  w.family("atoll_up", "gauge", "1 while the head answers");
  w.sample("atoll_up", {}, 1);
  w.family("atoll_epoch", "gauge", "membership epoch");
  w.sample("atoll_epoch", {}, status.value("epoch", json(0)));
  w.family("atoll_run_finished", "gauge", "1 once every worker has finished its steps");
  w.sample("atoll_run_finished", {}, status.value("state", "") == "finished");

  std::map<std::string, int> by_state = {{"joining", 0},  {"syncing", 0}, {"active", 0},
                                         {"draining", 0}, {"left", 0},    {"dead", 0}};
  for (const auto& m : members) by_state[m.value("state", "unknown")]++;
  w.family("atoll_members", "gauge", "nodes by membership state");
  for (const auto& [state, n] : by_state) w.sample("atoll_members", {{"state", state}}, n);
  if (detail == metrics_detail::per_node) {
    w.family("atoll_member_heartbeat_age_seconds", "gauge", "time since each node's last heartbeat (its lease age)");
    for (const auto& m : members)
      w.sample("atoll_member_heartbeat_age_seconds", {{"node", number(m.value("node_id", json(0)))}},
               m.value("last_heartbeat_s", json(0)));
    w.family("atoll_worker_restarts_total", "counter", "worker restarts by each node's supervisor");
    for (const auto& m : members)
      w.sample("atoll_worker_restarts_total", {{"node", number(m.value("node_id", json(0)))}},
               m.value("worker_restarts", json(0)));
    per_worker(w, status, "atoll_worker_step", "gauge", "inner steps each worker has taken", "step");
    per_worker(w, status, "atoll_worker_loss", "gauge", "each worker's last training loss", "loss");
    per_worker(w, status, "atoll_worker_tokens_per_second", "gauge", "each worker's training throughput",
               "tokens_per_s");
    per_worker(w, status, "atoll_worker_sent_bytes_total", "counter", "bytes each worker sent", "bytes_sent");
    per_worker(w, status, "atoll_worker_received_bytes_total", "counter", "bytes each worker received",
               "bytes_received");
  } else {
    member_summary(w, members);
    worker_summary(w, status);
  }

  w.family("atoll_fragment_rounds_committed_total", "counter", "outer rounds committed per fragment");
  const auto fragments = status.value("fragments", json::array());
  for (const auto& f : fragments)
    w.sample("atoll_fragment_rounds_committed_total", {{"fragment", number(f.value("id", json(0)))}},
             f.value("round", json(0)));

  const auto h = status.value("round_duration_s", json::object());
  w.family("atoll_round_duration_seconds", "histogram", "outer round, first contribution to release");
  const auto le = h.value("le", json::array());
  const auto at_most = h.value("at_most", json::array());
  for (std::size_t i = 0; i < le.size() && i < at_most.size(); ++i)
    w.sample("atoll_round_duration_seconds_bucket", {{"le", number(le[i])}}, at_most[i]);
  w.sample("atoll_round_duration_seconds_bucket", {{"le", "+Inf"}}, h.value("count", json(0)));
  w.sample("atoll_round_duration_seconds_sum", {}, h.value("sum", json(0.0)));
  w.sample("atoll_round_duration_seconds_count", {}, h.value("count", json(0)));

  // The run's progress through its data (the data cursor; zeros until a worker leases).
  const auto data = status.value("data", json::object());
  w.family("atoll_data_epoch", "gauge", "the first epoch of the run's data not ended");
  w.sample("atoll_data_epoch", {}, data.value("epoch", json(0)));
  w.family(
      "atoll_data_units", "gauge",
      "units of the run's data by state: consumed (of the current epoch, by "
      "committed rounds), in_flight (leased), returned (waiting for a lease), partial (learned by some fragments)");
  for (const char* state : {"consumed", "in_flight", "returned", "partial"})
    w.sample("atoll_data_units", {{"state", state}}, data.value(state, json(0)));

  const auto eval = status.value("last_eval", json::object());
  w.family("atoll_heldout_loss", "gauge", "held-out loss of theta_global at the last evaluation");
  if (eval.value("step", -1) >= 0) w.sample("atoll_heldout_loss", {}, eval.value("val_loss", json(0.0)));
  w.family("atoll_heldout_loss_step", "gauge", "inner step of the last held-out evaluation (-1: none yet)");
  w.sample("atoll_heldout_loss_step", {}, eval.value("step", json(-1)));

  w.family(
      "atoll_refused_messages_total", "counter",
      "messages refused by ingress checks, by process (the head, and the nodes summed unless per node) and reason");
  const auto refused = status.value("refused", json::object());  // kept: items() iterates it
  std::map<std::string, double> by_nodes;  // reason -> count, summed over the nodes
  for (const auto& [process, reasons] : refused.items()) {
    if (process == "total") continue;
    for (const auto& [reason, count] : reasons.items()) {
      if (process != "head" && detail == metrics_detail::summary)
        by_nodes[reason] += count.is_number() ? count.get<double>() : 0.0;
      else w.sample("atoll_refused_messages_total", {{"process", process}, {"reason", reason}}, count);
    }
  }
  for (const auto& [reason, count] : by_nodes)
    w.sample("atoll_refused_messages_total", {{"process", "nodes"}, {"reason", reason}}, count);

  const auto storage = status.value("storage", json::object());
  w.family("atoll_keeper_healthy", "gauge", "1 while the head's keeper commits reach the disk");
  w.sample("atoll_keeper_healthy", {}, storage.value("ok", true));
  w.family("atoll_keeper_failed_commits_total", "counter", "commits the head's keeper could not write");
  w.sample("atoll_keeper_failed_commits_total", {}, storage.value("failed_commits", json(0)));
  w.family("atoll_keeper_logged_bytes_total", "counter",
           "bytes of round inputs the head's keeper appended to its round log (commit bytes per keeper)");
  w.sample("atoll_keeper_logged_bytes_total", {}, storage.value("logged_bytes", json(0)));
  w.family("atoll_keeper_replay_mismatches_total", "counter",
           "round records whose replay on the head's keeper missed the coordinator's digest");
  w.sample("atoll_keeper_replay_mismatches_total", {}, storage.value("replay_mismatches", json(0)));
  w.family("atoll_keeper_stored_bytes", "gauge", "bytes of snapshots and round records the head's keeper holds");
  w.sample("atoll_keeper_stored_bytes", {}, storage.value("stored_bytes", json(0)));

  const auto link = status.value("head_link", json::object());
  w.family("atoll_head_link_bytes_total", "counter", "bytes on the head's link: in, out, relayed between nodes");
  for (const auto* d : {"in", "out", "relayed"})
    w.sample("atoll_head_link_bytes_total", {{"direction", d}}, link.value(std::string("bytes_") + d, json(0)));
  const auto sec = status.value("security", json::object());
  w.family("atoll_auth_denied_total", "counter", "CURVE clients the head refused");
  w.sample("atoll_auth_denied_total", {}, sec.value("auth_denied", json(0)));
  w.family("atoll_handshakes_failed_total", "counter", "failed CURVE handshakes, head and nodes");
  w.sample("atoll_handshakes_failed_total", {}, sec.value("handshakes_failed", json(0)));
  return w.str();
}

}  // namespace atl
