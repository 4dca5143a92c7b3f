#pragma once
// The parts of `atoll up` that a single head (head_process.cpp) and heads that fail over
// (head_failover.cpp) share.
#include <functional>
#include <string>

#include "head/head_process.hpp"
#include "runtime/core/exit_status.hpp"
#include "storage/kv_store.hpp"
#include "storage/registry_store.hpp"

namespace atl {

// direct_run's exit code when the registry stopped because it could not save its state:
// the lead ended (or could not be proven), and another head carries on.
inline constexpr int head_lost_its_lead = code_of(exit_status::lost_lead);

// The run's snapshot: stored (the run resumes as it was, --config/--set/--model ignored),
// else a new run from the config file, overrides and model, saved before it returns.
expected<registry_snapshot> initial_snapshot(registry_store& store, const head_options& opt);

struct direct_run_hooks {
  std::function<bool()> stop;  // polled every 200 ms: true stops the registry
  // The registry's store is fenced by an election (etcd): a refused save stops it
  // (registry_deps::stop_when_unsaved), and the rounds must be on the nodes' keepers.
  bool fenced = false;
  // Told the dashboard's URL once it serves ("" without --http).
  std::function<void(const std::string& url)> serving_http;
};

// Directs the run from `snap` until the registry stops (atoll down), `hooks.stop()` turns
// true, or a fenced save is refused. `db` holds keeper/0's rounds; `reg_store` the
// registry. Returns the process exit code.
int direct_run(const head_options& opt, kv_store& db, registry_store& reg_store, const registry_snapshot& snap,
               const direct_run_hooks& hooks);

// `atoll up --registry etcd://...`: stands by until elected, directs the run while it
// leads, and stands by again when it loses the lead.
int run_failover_head(const head_options& opt, kv_store& db);

}  // namespace atl
