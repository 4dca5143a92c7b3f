#include "actors/decisions/contribution_weight.hpp"

namespace atl {

float contribution_weight(bool by_samples, const trained_since_sync& trained) {
  if (!by_samples) return 1.0f;
  const auto w = trained.samples + trained.steps_without_samples;
  return w > 0 ? static_cast<float>(w) : 1.0f;
}

}  // namespace atl
