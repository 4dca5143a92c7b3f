// The compiled half of `import atoll` (python/atoll/__init__.py is the other): a node of an
// Atoll run inside the user's Python process, the same node as `atoll join` (run_node), whose
// one worker syncs the user's own parameter tensors (training/external_replica.hpp).
//
// Tensors cross as (data pointer, shape, dtype, device): the module wraps the user's storage
// without a copy and without linking PyTorch's Python bindings, so it works with any
// PyTorch whose LibTorch it was built against. The Python side keeps the tensors alive.
//
// Threads: run_node runs on a thread of its own (CAF's threads and the worker under it);
// the user's thread only waits on step_turns, with the GIL released. No runtime thread
// ever takes the GIL.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <torch/torch.h>

#include "node/node_process.hpp"
#include "runtime/core/error.hpp"
#include "training/external_replica.hpp"
#include "training/task.hpp"

namespace py = pybind11;

namespace atl {
namespace {

// A typed error, raised as _atoll.Error("code: message"); python/atoll turns the code into
// its own exception class.
struct python_error : std::runtime_error {
  explicit python_error(const error& e) : std::runtime_error(std::string(to_string(e.code)) + ": " + e.message) {}
};

struct tensor_ref {
  std::uintptr_t data = 0;
  std::vector<std::int64_t> shape;
  std::string dtype;  // "float32"
  std::string device;  // "cpu", "cuda:0"
  std::string name;
};

torch::Tensor wrap(const tensor_ref& t) {
  if (t.dtype != "float32")
    throw python_error(make_error(errc::invalid_config, "parameter " + t.name + " is " + t.dtype +
                                                            ": Atoll syncs fp32 parameters (keep the master "
                                                            "weights in fp32 and use autocast for lower precision)"));
  // No deleter: the storage stays the user's tensor's.
  return torch::from_blob(reinterpret_cast<void*>(t.data), t.shape,
                          torch::TensorOptions().dtype(torch::kFloat32).device(torch::Device(t.device)));
}

// One node in this process, from start to leave.
class python_node {
 public:
  python_node(node_options options, const std::vector<std::vector<tensor_ref>>& groups, std::uint64_t data_units,
              std::uint64_t batch_size)
      : options_(std::move(options)), model_(std::make_shared<external_model>()) {
    model_->data_units = data_units;
    model_->batch_units = batch_size;
    for (const auto& group : groups) {
      model_->groups.emplace_back();
      model_->names.emplace_back();
      for (const auto& t : group) {
        model_->groups.back().push_back(wrap(t));
        model_->names.back().push_back(t.name);
      }
    }
    if (auto err = check_external_model(*model_)) throw python_error(err);
    auto make_replica = external_replica_factory(model_);
    external_.signature = signature_of(*model_);
    external_.factory = [this, make_replica](const run_config& cfg, const replica_spec& spec) {
      std::unique_ptr<replica> r;
      try {
        r = make_replica(cfg, spec);
      } catch (const std::exception& e) {  // e.g. more fragments than the model has groups
        // A restart would fail the same way: stop the node and tell the user why.
        std::lock_guard lock(mu_);
        if (!failure_) failure_ = error_of(e);
        stop_ = true;
        changed_.notify_all();
        throw;
      }
      std::lock_guard lock(mu_);
      rank_ = spec.rank;
      world_ = spec.world_size;
      steps_ = cfg.steps;
      started_ = true;
      changed_.notify_all();
      return r;
    };
    external_.stop_requested = [this] { return stop_.load(); };
    external_.failure = [this](const error& e) {
      std::lock_guard lock(mu_);
      if (!failure_) failure_ = e;
      changed_.notify_all();
    };
    thread_ = std::thread([this] {
      const int code = run_node(options_, &external_);
      model_->turns.finish();  // a user waiting for a step learns that there are no more
      std::lock_guard lock(mu_);
      if (code != 0 && !failure_)
        failure_ =
            make_error(errc::not_ready, "the node stopped (exit code " + std::to_string(code) + "; see its log)");
      ended_ = true;
      changed_.notify_all();
    });
  }

  ~python_node() { stop_and_join(); }

  // Until the worker exists (its rank is known), or the node failed. python/atoll then
  // waits for the worker's first turn, so that the run's initial state is in the user's
  // tensors before the first forward.
  void wait_started(double timeout_s) {
    {
      py::gil_scoped_release no_gil;
      std::unique_lock lock(mu_);
      const bool woke = changed_.wait_for(lock, std::chrono::duration<double>(timeout_s),
                                          [&] { return started_ || ended_ || failure_; });
      if (!woke)
        throw python_error(make_error(
            errc::timeout, "the node did not get a worker within " + std::to_string(static_cast<int>(timeout_s)) +
                               " s (the run waits for run.min_workers nodes, or it is full or finished)"));
      if (failure_) throw python_error(*failure_);
      if (ended_) throw python_error(make_error(errc::not_ready, "the node stopped before its worker started"));
    }
  }

  bool wait_turn() {
    py::gil_scoped_release no_gil;
    return model_->turns.wait_for_worker() == step_turns::turn::go;
  }

  // The indices of the user's next batch from the run's data cursor (atoll.ElasticSampler);
  // nullopt once the worker finished.
  std::optional<std::vector<std::uint64_t>> take_units() {
    std::vector<std::uint64_t> units;
    step_turns::units_turn got;
    {
      py::gil_scoped_release no_gil;
      got = model_->turns.take_units(units);
    }
    if (got == step_turns::units_turn::done) return std::nullopt;
    if (got == step_turns::units_turn::asked_ahead)
      throw python_error(make_error(errc::invalid_config,
                                    "a batch was asked for before the one before it was stepped: the sampler gives "
                                    "one batch per diloco.step(), so its DataLoader cannot prefetch (num_workers=0)"));
    return units;
  }

  void hand_over(float loss, std::int64_t samples, std::optional<float> held_out) {
    model_->turns.hand_over({loss, samples, held_out});
  }

  void leave() {
    py::gil_scoped_release no_gil;
    stop_and_join();
  }

  std::optional<std::pair<std::string, std::string>> failure() {
    std::lock_guard lock(mu_);
    if (!failure_) return std::nullopt;
    return std::make_pair(std::string(to_string(failure_->code)), failure_->message);
  }

  std::uint32_t rank() {
    std::lock_guard lock(mu_);
    return rank_;
  }
  std::uint32_t world() {
    std::lock_guard lock(mu_);
    return world_;
  }
  std::int64_t steps() {
    std::lock_guard lock(mu_);
    return steps_;
  }
  std::int64_t steps_taken() const { return model_->turns.steps_handed_over(); }
  // The groups the worker wrote since the last call (python/atoll/group.py sends them on).
  std::vector<std::size_t> take_written_groups() { return model_->written.take(); }

 private:
  void stop_and_join() {
    stop_ = true;
    model_->turns.close();  // a worker waiting for a step gives up waiting
    if (thread_.joinable()) thread_.join();
  }

  node_options options_;
  std::shared_ptr<external_model> model_;
  external_node external_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable changed_;
  bool started_ = false, ended_ = false;
  std::optional<error> failure_;
  std::uint32_t rank_ = 0, world_ = 0;
  std::int64_t steps_ = 0;
};

}  // namespace
}  // namespace atl

PYBIND11_MODULE(_atoll, m) {
  using namespace atl;
  m.doc() = "Atoll's node runtime for a user's own PyTorch loop (use the atoll package, not this module)";
  py::register_exception<python_error>(m, "Error");
  m.def("error_names", [] {
    std::vector<std::string> names;
    for (int c = 1; c <= static_cast<int>(last_errc); ++c) names.push_back(to_string(static_cast<errc>(c)));
    return names;
  });

  py::class_<tensor_ref>(m, "TensorRef")
      .def(py::init([](std::uintptr_t data, std::vector<std::int64_t> shape, std::string dtype, std::string device,
                       std::string name) {
             return tensor_ref{data, std::move(shape), std::move(dtype), std::move(device), std::move(name)};
           }),
           py::arg("data"), py::arg("shape"), py::arg("dtype"), py::arg("device"), py::arg("name"));

  py::class_<python_node>(m, "Node")
      .def(py::init([](const std::string& head, const std::string& keys, bool insecure, const std::string& run_dir,
                       int wait_for_head, const std::string& listen, bool no_listen,
                       const std::vector<std::vector<tensor_ref>>& groups, std::uint64_t data_units,
                       std::uint64_t batch_size) {
             node_options opt;
             opt.head = head;
             opt.keys_dir = keys;
             opt.insecure = insecure;
             opt.run_dir = run_dir;
             opt.wait_for_head_s = wait_for_head;
             opt.listen = listen;
             opt.no_listen = no_listen;
             return std::make_unique<python_node>(opt, groups, data_units, batch_size);
           }),
           py::arg("head"), py::arg("keys"), py::arg("insecure"), py::arg("run_dir"), py::arg("wait_for_head"),
           py::arg("listen"), py::arg("no_listen"), py::arg("groups"), py::arg("data_units") = 0,
           py::arg("batch_size") = 0)
      .def("wait_started", &python_node::wait_started, py::arg("timeout_s"))
      .def("wait_turn", &python_node::wait_turn)
      .def("hand_over", &python_node::hand_over, py::arg("loss"), py::arg("samples"), py::arg("held_out") = py::none())
      .def("leave", &python_node::leave)
      .def("failure", &python_node::failure)
      .def("take_written_groups", &python_node::take_written_groups)
      .def("take_units", &python_node::take_units)
      .def_property_readonly("rank", &python_node::rank)
      .def_property_readonly("world", &python_node::world)
      .def_property_readonly("steps", &python_node::steps)
      .def_property_readonly("steps_taken", &python_node::steps_taken);
}
