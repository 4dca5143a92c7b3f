#pragma once
// The signature of a model that the head does not hold (run.example = external, a model
// trained from the user's own PyTorch loop): its parameters in order, one line each,
// "name dtype shape group" (e.g. "fc1.weight float32 128x784 1": fragments are made of
// whole groups, so the grouping is part of the model). The first node's signature
// becomes the run's; a node whose signature differs is refused, naming the first
// difference. Pure: no LibTorch, so the head and the tests use it without a model.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

struct parameter_signature {
  std::string name;
  std::string dtype;  // "float32", ...
  std::vector<std::int64_t> shape;
  std::size_t group = 0;  // the parameter group it belongs to (groups number 0, 1, ... in order)
};

// One line a parameter; names must be non-empty and without spaces or line breaks.
std::string format_signature(const std::vector<parameter_signature>& parameters);
// Refuses (invalid_config) a line that is not "name dtype shape group", groups that are not
// numbered 0, 1, ... in order, or an empty signature.
expected<std::vector<parameter_signature>> parse_signature(const std::string& text);
// The first difference between a node's signature and the run's, in words; empty when
// they are the same.
std::string first_signature_difference(const std::string& node, const std::string& run);

// The run.example of a run whose model comes from its nodes (the Python API).
inline constexpr const char* external_example = "external";

// Whether the head lets a node with this model join (its Hello): the node's model file
// digest must be the run's, and in an external run its signature (a Python node's model,
// or a C++ node's TorchScript --model) the run's, or the first.
struct node_model_check {
  status refusal;  // model_mismatch, naming what differs
  bool adopt_signature = false;  // the first node of an external run: its signature becomes the run's
};
node_model_check check_node_model(const std::string& example, const std::string& run_digest,
                                  const std::string& run_signature, const std::string& node_digest,
                                  const std::string& node_signature);

}  // namespace atl
