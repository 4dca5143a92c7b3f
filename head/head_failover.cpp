// `atoll up --registry etcd://...`: heads that fail over. Every head campaigns for the
// run's election key (head/head_election.hpp); the one that wins directs the run from
// the registry stored in etcd (storage/etcd_store.hpp), the others stand by without
// listening, so nodes given every head's address (`atoll join --head A,B`) reach the
// leader alone. A standby with --http redirects the dashboard to the leader's (the leader
// writes its URL to ROOT/http).
//
//   standing by --campaign won--> leading: load (or create) the run, epoch := max(epoch + 1, term),
//                                 listen and direct
//   leading --renewals stop for ttl - margin, or a save refused--> standing by (stops listening)
//   leading --atoll down, SIGINT/SIGTERM--> resign (the next head leads at once), exit
//
// The epoch a leader starts with is at least its term, and its term exceeds every
// revision its predecessor wrote (each epoch it published was saved first, one revision
// or more each), so nodes, coordinators and keepers see a new leader's epoch above any
// its predecessor sent.
#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>

#include "head/head_election.hpp"
#include "head/head_http.hpp"
#include "head/head_internal.hpp"
#include "node/lifecycle.hpp"
#include "runtime/etcd/etcd_client.hpp"
#include "runtime/process/log.hpp"
#include "storage/etcd_store.hpp"

namespace atl {
namespace {

using clock_type = std::chrono::steady_clock;

// Renews the lead's lease every ttl / 3 on a thread of its own while the head directs.
class lead_keeper {
 public:
  lead_keeper(head_election& election, std::chrono::seconds ttl)
      : election_(election), ttl_(ttl), last_renewal_sent_(clock_type::now().time_since_epoch().count()) {
    thread_ = std::thread([this] { run(); });
  }
  ~lead_keeper() {
    done_ = true;
    thread_.join();
  }
  bool lost() const {
    return lead_lost(clock_type::time_point(clock_type::duration(last_renewal_sent_.load())), clock_type::now(), ttl_);
  }

 private:
  void run() {
    while (!done_) {
      const auto sent = clock_type::now();
      if (auto err = election_.renew()) {
        // Once per streak: etcd without a quorum fails every try for as long as it lasts.
        if (failed_in_a_row_++ == 0) log_warn("head: cannot renew the lead: " + err.describe());
      } else {
        if (failed_in_a_row_ > 0)
          log_info("head: renewed the lead again, after " + std::to_string(failed_in_a_row_) + " failed tries");
        failed_in_a_row_ = 0;
        last_renewal_sent_ = sent.time_since_epoch().count();
      }
      const auto next = sent + ttl_ / 3;
      while (!done_ && clock_type::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

  head_election& election_;
  std::chrono::seconds ttl_;
  std::atomic<clock_type::rep> last_renewal_sent_;
  std::atomic<bool> done_{false};
  int failed_in_a_row_ = 0;  // the renewal thread's own
  std::thread thread_;
};

// The leading head's dashboard URL, as the leader wrote it to etcd (ROOT/http), for the
// standby's redirects: read by the campaign loop, served by the HTTP thread.
class leader_http_url {
 public:
  void set(std::string url) {
    std::lock_guard<std::mutex> lock(mu_);
    url_ = std::move(url);
  }
  std::string get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return url_;
  }

 private:
  mutable std::mutex mu_;
  std::string url_;
};

// Campaigns every ttl / 3 until this head leads or is asked to stop; meanwhile, with
// --http, redirects the dashboard's requests to the leader's.
std::optional<election_outcome> stand_by(const head_options& opt, const etcd_registry& where, etcd_client& etcd,
                                         head_election& election, std::chrono::seconds ttl, const volatile bool& stop) {
  leader_http_url leader_url;
  std::unique_ptr<standby_http> http;
  if (!opt.http.empty()) {
    auto started = standby_http::start(opt.http, [&leader_url] { return leader_url.get(); });
    if (started) http = std::move(*started);
    else log_warn("head: standing by without --http: " + started.err().describe());
  }
  std::string announced;  // the leader last logged
  while (!stop) {
    auto outcome = election.campaign();
    if (outcome && outcome->leading) return *outcome;  // `http` closes: the leader's binds there
    if (http) {
      auto url = outcome ? etcd.get(where.http_key()) : expected<std::optional<etcd_value>>(outcome.err());
      leader_url.set(url && *url ? (*url)->value : std::string());
    }
    const auto seen = outcome ? outcome->leader + " (term " + std::to_string(outcome->term) + ")"
                              : "no answer: " + outcome.err().describe();
    if (seen != announced) log_info("head: standing by; leading: " + seen);
    announced = seen;
    const auto next = clock_type::now() + ttl / 3;
    while (!stop && clock_type::now() < next) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return std::nullopt;
}

}  // namespace

int run_failover_head(const head_options& opt, kv_store& db) {
  auto where = parse_etcd_registry(opt.registry);
  if (!where) {
    std::cerr << "atoll up: " << where.err().describe() << "\n";
    return code_of(exit_status::config);
  }
  if (opt.election_ttl_s < 2) {
    std::cerr << "atoll up: --election-ttl " << opt.election_ttl_s
              << ": at least 2 s (etcd counts leases in seconds)\n";
    return code_of(exit_status::config);
  }
  const std::chrono::seconds ttl(opt.election_ttl_s);
  const auto& stop = install_stop_signals();
  etcd_client etcd(where->endpoints, std::chrono::duration_cast<std::chrono::milliseconds>(ttl) / 3);
  head_election election(etcd, where->election_key(), opt.listen, ttl);
  log_info("head: registry in etcd at " + where->endpoints + " under " + where->root);
  while (!stop) {
    const auto lead = stand_by(opt, *where, etcd, election, ttl, stop);
    if (!lead) break;
    log_info("head: leading the run (term " + std::to_string(lead->term) + ")");
    auto store = make_etcd_store(where->endpoints, where->root, {where->election_key(), lead->term});
    registry_store reg_store(*store);
    auto snap = initial_snapshot(reg_store, opt);
    if (snap) {
      snap->epoch = std::max<std::uint64_t>(snap->epoch + 1, static_cast<std::uint64_t>(lead->term));
      if (auto err = reg_store.save(*snap)) snap = err;
    }
    int code = head_lost_its_lead;
    if (!snap && snap.err().code != errc::stale_epoch && snap.err().code != errc::timeout &&
        snap.err().code != errc::not_ready) {
      std::cerr << "atoll up: " << snap.err().describe() << "\n";
      (void)election.resign();
      return code_of(exit_status::config);
    }
    if (snap) {
      lead_keeper keeper(election, ttl);
      direct_run_hooks hooks;
      hooks.stop = [&] { return stop || keeper.lost(); };
      hooks.fenced = true;
      hooks.serving_http = [&](const std::string& url) {  // for the standbys' redirects
        etcd_client own(where->endpoints);  // `etcd` is the lead keeper's now
        auto written = own.write_if_held(where->election_key(), lead->term, {{where->http_key(), url}});
        if (!written || !*written) log_warn("head: cannot tell etcd where the dashboard is");
      };
      code = direct_run(opt, db, reg_store, *snap, hooks);
      if (keeper.lost()) code = head_lost_its_lead;
    }
    if (code != head_lost_its_lead || stop) {
      (void)election.resign();
      return code;
    }
    log_warn("head: lost the lead (term " + std::to_string(lead->term) + "); standing by");
  }
  (void)election.resign();
  return code_of(exit_status::finished);
}

}  // namespace atl
