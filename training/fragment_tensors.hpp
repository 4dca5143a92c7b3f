#pragma once
// A replica's fragments as lists of parameter tensors: made from the model's parameter
// groups, and copied out and in as fp32 values (any device; the host side of a round).
// Include only from LibTorch code.
#include <cstddef>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "runtime/process/config.hpp"

namespace atl {

// diloco.fragments fragments of whole groups, in group order: contiguous runs of groups
// (diloco.assignment = sequential) or every P-th group (strided). Throws
// std::invalid_argument when there are fewer groups than fragments.
std::vector<std::vector<torch::Tensor>> assign_fragments(const std::vector<std::vector<torch::Tensor>>& groups,
                                                         const run_config& cfg);

// The fragment that group g of group_count goes to (as assign_fragments places it).
std::size_t fragment_of_group(std::size_t g, std::size_t group_count, const run_config& cfg);

// The signature (runtime/core/model_signature.hpp) of parameters in groups, with their names
// in the same order: what the head compares between the nodes of an external run.
std::string signature_of_groups(const std::vector<std::vector<torch::Tensor>>& groups,
                                const std::vector<std::vector<std::string>>& names);
// "float32", "bfloat16", ...: PyTorch's names, as signatures and errors say them.
std::string dtype_name(const torch::Tensor& t);

std::size_t value_count(const std::vector<torch::Tensor>& tensors);
// The tensors' values, one after the other, as fp32 (value_count of them).
void read_values(const std::vector<torch::Tensor>& tensors, float* values);
// Writes them back in place (without autograd), on each tensor's own device.
void write_values(std::vector<torch::Tensor>& tensors, const float* values);

}  // namespace atl
