// Host implementations of the replica's outer-sync side: theta_global and the residuals
// live in host memory, next to a replica whose parameters are read and written as fp32.
#include "actors/worker/replica.hpp"

namespace atl {

struct replica::host_sync {
  std::vector<std::vector<float>> global;  // per fragment; empty until adopted
  std::vector<error_feedback> feedback;  // per fragment
};

replica::host_sync& replica::host() {
  if (!host_) {
    host_ = std::make_shared<host_sync>();
    host_->global.resize(fragment_count());
    host_->feedback.resize(fragment_count());
  }
  return *host_;
}

void replica::adopt_global(std::size_t f, const float* theta_global) {
  auto& global = host().global.at(f);
  global.assign(theta_global, theta_global + fragment_size(f));
  write_fragment(f, global.data());
}

void replica::merge_global(std::size_t f, const float* theta_global, float alpha) {
  auto& global = host().global.at(f);
  global.assign(theta_global, theta_global + fragment_size(f));
  if (alpha == 0.0f) {
    write_fragment(f, global.data());
    return;
  }
  std::vector<float> local(global.size());
  read_fragment(f, local.data());
  for (std::size_t i = 0; i < local.size(); ++i) local[i] = alpha * local[i] + (1.0f - alpha) * global[i];
  write_fragment(f, local.data());
}

status replica::encode_pseudo_gradient(std::size_t f, const encoding& how, encoded_values& out) {
  auto& h = host();
  const auto& global = h.global.at(f);
  if (global.size() != fragment_size(f))
    return make_error(errc::not_ready, "fragment " + std::to_string(f) + " has no theta_global yet");
  std::vector<float> delta(global.size());
  read_fragment(f, delta.data());
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = global[i] - delta[i];
  return how.error_feedback
             ? h.feedback[f].encode(how.codec, delta.data(), delta.size(), how.chunk, out, how.feedback_decay)
             : encode(how.codec, delta.data(), delta.size(), how.chunk, out);
}

void replica::adopt_every_global() {
  auto& h = host();
  for (std::size_t f = 0; f < h.global.size(); ++f)
    if (h.global[f].size() == fragment_size(f)) write_fragment(f, h.global[f].data());
}

float replica::evaluate_global() {
  auto& h = host();
  std::vector<std::vector<float>> local(h.global.size());
  for (std::size_t f = 0; f < local.size(); ++f) {
    if (h.global[f].size() != fragment_size(f)) continue;  // never adopted: the local one stands in
    local[f].resize(fragment_size(f));
    read_fragment(f, local[f].data());
    write_fragment(f, h.global[f].data());
  }
  const float loss = evaluate();
  for (std::size_t f = 0; f < local.size(); ++f)
    if (!local[f].empty()) write_fragment(f, local[f].data());
  return loss;
}

}  // namespace atl
