#include "runtime/core/exit_status.hpp"

namespace atl {

exit_status exit_status_for(errc why) {
  switch (why) {
    case errc::none: return exit_status::finished;
    case errc::invalid_config:
    case errc::bad_model:
    case errc::bad_data: return exit_status::config;
    case errc::model_mismatch:
    case errc::cluster_mismatch:
    case errc::version_mismatch: return exit_status::refused;
    default: return exit_status::retriable;
  }
}

const char* to_string(exit_status s) {
  switch (s) {
    case exit_status::finished: return "finished";
    case exit_status::retriable: return "retriable";
    case exit_status::config: return "config";
    case exit_status::lost_lead: return "lost_lead";
    case exit_status::refused: return "refused";
    case exit_status::drained: return "drained";
  }
  return "unknown";
}

}  // namespace atl
