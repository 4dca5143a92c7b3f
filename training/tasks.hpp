#pragma once
// The registered tasks, seen without LibTorch: names for validation and a replica
// factory for node agents.
#include <string>
#include <vector>

#include "actors/worker/replica.hpp"

namespace atl {

std::vector<std::string> task_names();
bool has_task(const std::string& name);
// Builds a LibTorch replica of the configured task (training/torch_replica.cpp).
// `model_file`: this process's copy of the run's TorchScript model (model.file), if any.
replica_factory torch_replica_factory(const std::string& model_file = {});

// Builds the task of `cfg` for rank 0 of `world_size` workers, as a worker would, and
// returns its error: a bad data file (bad_data), a model that breaks the contract
// (bad_model), a bad combination of knobs (invalid_config). For start-up checks.
// With `with_data` false, only the model is checked (the head may have no data).
status check_task(const run_config& cfg, const std::string& model_file, std::uint32_t world_size, bool with_data);

// The values in each fragment of `cfg`'s model, built as check_task builds it with no data
// read: what the head sizes diloco.shards = auto by. Typed errors as check_task's.
expected<std::vector<std::size_t>> model_fragment_sizes(const run_config& cfg, const std::string& model_file);

// `atoll export`: the model of `cfg` (no data read) with theta_global of each fragment
// (`fragments[f]`, fragment_size(f) values) written to `path` by the task's save().
status export_model(const run_config& cfg, const std::string& model_file,
                    const std::vector<std::vector<float>>& fragments, const std::string& path);

// The signature of a TorchScript model file (runtime/core/model_signature.hpp): a C++ node
// joins a run whose model is its Python nodes' own with it. Typed errors: bad_model.
expected<std::string> torchscript_signature(const std::string& model_file);

// The same for a run whose model is its nodes' own (run.example = external): a torch.save
// state dict keyed by parameter name, the tensors shaped and grouped as the run's model
// signature says (runtime/core/model_signature.hpp); training/external_replica.cpp.
status export_external_model(const run_config& cfg, const std::string& signature,
                             const std::vector<std::vector<float>>& fragments, const std::string& path);

}  // namespace atl

namespace atl {

// The compute threads of this process: LibTorch's intra-op threads and the BLAS
// library's pool (two workers on two cores want one each). Returns what was applied;
// blas_library is empty where no known BLAS pool was found.
struct compute_threads {
  int torch = 0;
  int blas = 0;
  std::string blas_library;
};
compute_threads set_compute_threads(int threads);
compute_threads set_compute_threads(int torch_threads, int blas_threads);
std::string describe(const compute_threads& threads);
// CUDA devices the linked LibTorch sees (0 with a CPU-only LibTorch such as Debian's).
std::size_t cuda_device_count();

}  // namespace atl
