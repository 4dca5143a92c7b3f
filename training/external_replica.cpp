#include "training/external_replica.hpp"

#include <limits>
#include <stdexcept>

#include "runtime/core/model_signature.hpp"
#include "runtime/process/log.hpp"
#include "training/device_fragments.hpp"
#include "training/fragment_tensors.hpp"
#include "training/task.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

// The first parameter in group order, and its name: what the others are checked against.
std::pair<const torch::Tensor*, const std::string*> first_parameter(const external_model& model) {
  for (std::size_t g = 0; g < model.groups.size(); ++g)
    if (!model.groups[g].empty() && !model.names[g].empty()) return {&model.groups[g][0], &model.names[g][0]};
  return {nullptr, nullptr};
}

class external_replica final : public replica {
 public:
  external_replica(const run_config& cfg, std::shared_ptr<external_model> model)
      : model_(std::move(model)),
        fragments_(assign_fragments(model_->groups, cfg)),
        groups_of_fragment_(fragments_.size()) {
    for (std::size_t g = 0; g < model_->groups.size(); ++g)
      groups_of_fragment_[fragment_of_group(g, model_->groups.size(), cfg)].push_back(g);
    // Parameters on a CUDA device (check_external_model allows one device) sync there, as
    // the built-in replica's do: no fp32 round trip through host memory.
    const auto* first = first_parameter(*model_).first;
    if (first != nullptr && first->is_cuda()) {
      on_device_ = std::make_unique<device_fragments>(fragments_, first->device());
      log_info("parameters on " + first->device().str() + ": outer sync on the device");
    }
  }

  std::size_t fragment_count() const override { return fragments_.size(); }
  std::size_t fragment_size(std::size_t f) const override { return value_count(fragments_.at(f)); }
  void read_fragment(std::size_t f, float* values) const override { read_values(fragments_.at(f), values); }
  void write_fragment(std::size_t f, const float* values) override {
    write_values(fragments_.at(f), values);
    model_->written.mark(groups_of_fragment_.at(f));
  }

  // The user's step, when the user's thread hands it over. A user who left (closed the
  // turns) hands over nothing: an empty step, and the node is stopping anyway.
  step_result train_step(std::int64_t) override {
    const auto step = model_->turns.wait_for_user_step();
    if (!step) return {0.0f, 0};
    return {step->loss, step->samples, step->held_out};
  }
  // Called once the worker has merged every result of its last step: the user's model
  // becomes theta_global, the same on every node, and the user's loop may end.
  std::optional<float> finish_queued_step() override {
    if (on_device_) {
      for (const auto f : on_device_->adopt_every_global()) model_->written.mark(groups_of_fragment_.at(f));
    } else {
      adopt_every_global();
    }
    model_->turns.finish();
    return std::nullopt;
  }

  // The outer-sync side on the device when the parameters are there (device_fragments), else
  // replica's host implementations (which write through write_fragment, marking the groups).
  void adopt_global(std::size_t f, const float* theta) override {
    if (!on_device_) return replica::adopt_global(f, theta);
    on_device_->adopt(f, theta);
    model_->written.mark(groups_of_fragment_.at(f));
  }
  void merge_global(std::size_t f, const float* theta, float alpha) override {
    if (!on_device_) return replica::merge_global(f, theta, alpha);
    on_device_->merge(f, theta, alpha);
    model_->written.mark(groups_of_fragment_.at(f));
  }
  status encode_pseudo_gradient(std::size_t f, const encoding& how, encoded_values& out) override {
    return on_device_ ? on_device_->encode(f, how, out) : replica::encode_pseudo_gradient(f, how, out);
  }

  step_result compute_gradients(std::int64_t) override { throw ddp_refused(); }
  void read_gradients(std::size_t, float*) const override { throw ddp_refused(); }
  void write_gradients(std::size_t, const float*) override { throw ddp_refused(); }
  void apply_gradients(std::int64_t) override { throw ddp_refused(); }

  // The held-out loss is the user's to compute (the worker asks evaluates() first), and
  // evaluate_global must not swap theta_global into tensors the user may be using.
  // atoll.ElasticSampler: the user's dataset as the run's data; each step's indices go to
  // the user's loop through the turns.
  std::uint64_t data_units() const override { return model_->data_units; }
  std::uint64_t units_per_step() const override { return model_->batch_units; }
  void queue_units(const std::vector<std::uint64_t>& units) override { model_->turns.offer_units(units); }

  bool evaluates() const override { return false; }
  float evaluate() override { return std::numeric_limits<float>::quiet_NaN(); }
  float evaluate_global() override { return std::numeric_limits<float>::quiet_NaN(); }

 private:
  static std::invalid_argument ddp_refused() {
    return std::invalid_argument("run.mode = ddp is not available to an external model");
  }

  std::shared_ptr<external_model> model_;
  std::vector<std::vector<torch::Tensor>> fragments_;
  std::vector<std::vector<std::size_t>> groups_of_fragment_;
  std::unique_ptr<device_fragments> on_device_;  // set when the parameters are on a CUDA device
};

}  // namespace

std::string signature_of(const external_model& model) { return signature_of_groups(model.groups, model.names); }

status check_external_model(const external_model& model) {
  if (model.groups.empty()) return make_error(errc::invalid_config, "the model has no parameters");
  if (model.names.size() != model.groups.size())
    return make_error(errc::invalid_config, "parameter names and groups do not match");
  for (std::size_t g = 0; g < model.groups.size(); ++g) {
    if (model.names[g].size() != model.groups[g].size())
      return make_error(errc::invalid_config, "parameter names and groups do not match in group " + std::to_string(g));
    for (std::size_t i = 0; i < model.groups[g].size(); ++i) {
      const auto& t = model.groups[g][i];
      const auto& name = model.names[g][i];
      if (name.empty() || name.find_first_of(" \n") != std::string::npos)
        return make_error(errc::invalid_config, "parameter name '" + name + "' is empty or has a space");
      if (t.scalar_type() != torch::kFloat32)
        return make_error(errc::invalid_config, "parameter " + name + " is " + dtype_name(t) +
                                                    ": Atoll syncs fp32 parameters (keep the master weights "
                                                    "in fp32 and use autocast for lower precision)");
      if (!t.is_contiguous()) return make_error(errc::invalid_config, "parameter " + name + " is not contiguous");
      const auto [first, first_name] = first_parameter(model);
      if (t.device() != first->device())
        return make_error(errc::invalid_config, "parameter " + name + " is on " + t.device().str() + " and " +
                                                    *first_name + " on " + first->device().str() +
                                                    ": Atoll syncs a model on one device");
    }
  }
  return {};
}

status export_external_model(const run_config& cfg, const std::string& signature,
                             const std::vector<std::vector<float>>& fragments, const std::string& path) {
  auto params = parse_signature(signature);
  if (!params)
    return make_error(errc::not_ready,
                      "the run has no model signature yet (no node has joined): " + params.err().message);
  try {
    std::vector<std::vector<torch::Tensor>> groups;
    std::vector<std::pair<std::string, torch::Tensor>> named;
    for (const auto& p : *params) {
      if (p.dtype != "float32") return make_error(errc::tensor_mismatch, p.name + " is " + p.dtype + ", not float32");
      if (p.group == groups.size()) groups.emplace_back();
      named.emplace_back(p.name, torch::zeros(p.shape, torch::kFloat32));
      groups.back().push_back(named.back().second);
    }
    auto made = assign_fragments(groups, cfg);
    if (made.size() != fragments.size())
      return make_error(errc::tensor_mismatch, "the store has " + std::to_string(fragments.size()) +
                                                   " fragments, the model " + std::to_string(made.size()));
    for (std::size_t f = 0; f < made.size(); ++f) {
      if (value_count(made[f]) != fragments[f].size())
        return make_error(errc::tensor_mismatch, "fragment " + std::to_string(f) + " has " +
                                                     std::to_string(fragments[f].size()) + " values, the model " +
                                                     std::to_string(value_count(made[f])));
      write_values(made[f], fragments[f].data());
    }
    save_state_dict(named, path);
  } catch (const std::exception& e) {
    return error_of(e);
  }
  return {};
}

replica_factory external_replica_factory(std::shared_ptr<external_model> model) {
  return [model](const run_config& cfg, const replica_spec&) -> std::unique_ptr<replica> {
    return std::make_unique<external_replica>(cfg, model);
  };
}

}  // namespace atl
