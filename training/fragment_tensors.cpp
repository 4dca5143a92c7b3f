#include "training/fragment_tensors.hpp"

#include <cstring>
#include <stdexcept>
#include <string>

#include "runtime/core/model_signature.hpp"

namespace atl {

std::vector<std::vector<torch::Tensor>> assign_fragments(const std::vector<std::vector<torch::Tensor>>& groups,
                                                         const run_config& cfg) {
  const std::size_t p_count = static_cast<std::size_t>(cfg.fragments);
  if (groups.size() < p_count)
    throw std::invalid_argument("diloco.fragments = " + std::to_string(p_count) + " but the model has only " +
                                std::to_string(groups.size()) + " layer groups");
  std::vector<std::vector<torch::Tensor>> fragments(p_count);
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (const auto& p : groups[g]) fragments[fragment_of_group(g, groups.size(), cfg)].push_back(p);
  return fragments;
}

std::size_t fragment_of_group(std::size_t g, std::size_t group_count, const run_config& cfg) {
  const std::size_t p_count = static_cast<std::size_t>(cfg.fragments);
  return cfg.assignment == "sequential" ? g * p_count / group_count : g % p_count;
}

std::string dtype_name(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kFloat32: return "float32";
    case torch::kFloat64: return "float64";
    case torch::kFloat16: return "float16";
    case torch::kBFloat16: return "bfloat16";
    default: return std::string(c10::toString(t.scalar_type()));
  }
}

std::string signature_of_groups(const std::vector<std::vector<torch::Tensor>>& groups,
                                const std::vector<std::vector<std::string>>& names) {
  std::vector<parameter_signature> params;
  for (std::size_t g = 0; g < groups.size(); ++g)
    for (std::size_t i = 0; i < groups[g].size(); ++i)
      params.push_back({names.at(g).at(i), dtype_name(groups[g][i]), groups[g][i].sizes().vec(), g});
  return format_signature(params);
}

std::size_t value_count(const std::vector<torch::Tensor>& tensors) {
  std::size_t n = 0;
  for (const auto& p : tensors) n += static_cast<std::size_t>(p.numel());
  return n;
}

void read_values(const std::vector<torch::Tensor>& tensors, float* values) {
  for (const auto& p : tensors) {
    auto c = p.detach().to(torch::kCPU, torch::kFloat32).contiguous();
    std::memcpy(values, c.data_ptr<float>(), static_cast<std::size_t>(c.numel()) * sizeof(float));
    values += c.numel();
  }
}

void write_values(std::vector<torch::Tensor>& tensors, const float* values) {
  torch::NoGradGuard no_grad;
  for (auto& p : tensors) {
    p.copy_(torch::from_blob(const_cast<float*>(values), p.sizes(), torch::kFloat32).to(p.device()));
    values += p.numel();
  }
}

}  // namespace atl
