// The coordinator's configuration from the run's (actors/coordinator/state.hpp).
#include "actors/coordinator/state.hpp"

#include "actors/shared/slicing.hpp"

namespace atl {

coordinator_config coordinator_config_for(const run_config& run, std::uint32_t fragment) {
  coordinator_config cc;
  cc.fragment = fragment;
  cc.min_workers = static_cast<std::size_t>(run.min_workers);
  cc.outer = {static_cast<float>(run.outer_lr), static_cast<float>(outer_momentum_of(run))};
  cc.average_only = run.mode == "ddp";
  cc.round_deadline = std::chrono::milliseconds(run.round_deadline_ms);
  cc.adaptive_close = run.round_close == "adaptive";
  cc.keep_late_work = run.late_work == "keep";
  cc.grace_k = run.grace_k;
  cc.grace_min = std::chrono::milliseconds(run.grace_min_ms);
  cc.grace_max = std::chrono::milliseconds(run.grace_max_ms);
  cc.state_chunk_values = static_cast<std::size_t>(run.state_chunk_values);
  cc.result_codec = result_codec_of(run);  // fp32 in ddp mode
  cc.result_chunk = static_cast<std::size_t>(run.codec_chunk);
  cc.state_follows_result = run.round_record == "result";
  cc.load_from_every_keeper = run.keepers == "nodes";
  cc.early_results = run.early_results;
  cc.reports_carry_data = run.data_cursor && !cc.average_only;
  return cc;
}

}  // namespace atl
