#include "runtime/core/model_signature.hpp"

#include <sstream>

namespace atl {
namespace {

std::string shape_text(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

std::string describe(const parameter_signature& p) {
  return "'" + p.name + "' " + p.dtype + " " + shape_text(p.shape) + " in group " + std::to_string(p.group);
}

}  // namespace

std::string format_signature(const std::vector<parameter_signature>& parameters) {
  std::string text;
  for (const auto& p : parameters)
    text += p.name + " " + p.dtype + " " + shape_text(p.shape) + " " + std::to_string(p.group) + "\n";
  return text;
}

expected<std::vector<parameter_signature>> parse_signature(const std::string& text) {
  std::vector<parameter_signature> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream words(line);
    parameter_signature p;
    std::string shape, extra;
    long long group = -1;
    if (!(words >> p.name >> p.dtype >> shape >> group) || (words >> extra))
      return make_error(errc::invalid_config, "model signature line " + std::to_string(out.size() + 1) + " '" + line +
                                                  "' is not 'name dtype shape group'");
    const long long previous = out.empty() ? -1 : static_cast<long long>(out.back().group);
    if (group != previous + 1 && (out.empty() || group != previous))
      return make_error(errc::invalid_config,
                        "model signature: " + p.name + " in group " + std::to_string(group) +
                            (out.empty() ? " first" : " after group " + std::to_string(previous)) +
                            " (groups number 0, 1, ... in order)");
    p.group = static_cast<std::size_t>(group);
    if (shape != "scalar") {
      std::istringstream dims(shape + "x");  // each dimension ends with an x: "12x" is refused
      std::string dim;
      while (std::getline(dims, dim, 'x') && !dims.eof()) {
        std::size_t used = 0;
        long long value = -1;
        try {
          value = std::stoll(dim, &used);
        } catch (const std::exception&) {}
        if (used != dim.size() || value < 0)
          return make_error(errc::invalid_config, "model signature: '" + shape + "' of " + p.name + " is not a shape");
        p.shape.push_back(value);
      }
    }
    out.push_back(std::move(p));
  }
  if (out.empty()) return make_error(errc::invalid_config, "model signature: no parameters");
  return out;
}

std::string first_signature_difference(const std::string& node, const std::string& run) {
  if (node == run) return {};
  auto mine = parse_signature(node);
  if (!mine) return "the node's signature is malformed: " + mine.err().message;
  auto theirs = parse_signature(run);
  if (!theirs) return "the run's signature is malformed: " + theirs.err().message;
  const std::size_t common = std::min(mine->size(), theirs->size());
  for (std::size_t i = 0; i < common; ++i) {
    const auto& a = (*mine)[i];
    const auto& b = (*theirs)[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.group != b.group)
      return "parameter " + std::to_string(i + 1) + " is " + describe(a) + " here, " + describe(b) + " in the run";
  }
  if (mine->size() != theirs->size())
    return std::to_string(mine->size()) + " parameters here, " + std::to_string(theirs->size()) + " in the run";
  return "the signatures differ in their spelling";  // e.g. "32" against "032": same model, refused all the same
}

node_model_check check_node_model(const std::string& example, const std::string& run_digest,
                                  const std::string& run_signature, const std::string& node_digest,
                                  const std::string& node_signature) {
  const auto refuse = [](std::string why) { return node_model_check{make_error(errc::model_mismatch, why), false}; };
  if (example == external_example) {
    // The signature is the model: a Python node's, or a C++ node's --model file's (whose
    // digest says nothing here: the Python nodes have no file).
    if (node_signature.empty())
      return refuse(
          "this run trains a model from its nodes' own PyTorch loops (run.example = external): join it with "
          "atoll.join() from Python, or with `atoll join --model FILE.pt` and the TorchScript module they train");
    if (run_signature.empty()) return {{}, true};
    if (auto diff = first_signature_difference(node_signature, run_signature); !diff.empty())
      return refuse("the node's model is not the run's: " + diff);
    return {};
  }
  // Any other run: the model file decides. A C++ node's --model also brings a signature
  // (it cannot know the run's example before it joins); a Python node brings only that.
  if (!node_signature.empty() && node_digest.empty())
    return refuse("the node brings its own model, but this run trains " +
                  (run_digest.empty() ? "the built-in " + example : "model.digest " + run_digest) +
                  " (start the head with --set run.example=external)");
  if (node_digest != run_digest)
    return refuse("the node's model (" + (node_digest.empty() ? std::string("no model") : node_digest) +
                  ") is not the run's (" + (run_digest.empty() ? "built-in " + example : "model.digest " + run_digest) +
                  "); start the node without --model to receive the run's");
  return {};
}

}  // namespace atl
