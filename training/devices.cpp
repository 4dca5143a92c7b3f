// What LibTorch reports about this process's compute: threads and CUDA devices.
#include "training/tasks.hpp"

#include <dlfcn.h>

#include <torch/torch.h>

namespace atl {

namespace {

// The BLAS library's own thread pool, found by symbol in the loaded libraries (Debian's
// LibTorch calls whichever libblas.so.3 the alternatives system points at).
struct blas_pool {
  const char* name;
  const char* set_symbol;
  const char* get_symbol;
};
constexpr blas_pool blas_pools[] = {
    {"OpenBLAS", "openblas_set_num_threads", "openblas_get_num_threads"},
    {"BLIS", "bli_thread_set_num_threads", "bli_thread_get_num_threads"},
};

}  // namespace

compute_threads set_compute_threads(int threads) { return set_compute_threads(threads, threads); }

compute_threads set_compute_threads(int torch_threads, int blas_threads) {
  torch::set_num_threads(torch_threads);  // every thread picks this up at its first parallel op
  compute_threads applied{torch_threads, 0, ""};
  // LibTorch does not size the BLAS pool: OpenBLAS's pthreads build starts one thread per
  // core and spins them between calls, so a worker given one thread kept two cores busy.
  for (const auto& pool : blas_pools) {
    auto set = reinterpret_cast<void (*)(int)>(::dlsym(RTLD_DEFAULT, pool.set_symbol));
    auto get = reinterpret_cast<int (*)()>(::dlsym(RTLD_DEFAULT, pool.get_symbol));
    if (!set || !get) continue;
    set(blas_threads);
    applied.blas = get();
    applied.blas_library = pool.name;
    break;
  }
  return applied;
}

std::string describe(const compute_threads& t) {
  std::string text = "LibTorch uses " + std::to_string(t.torch) + " thread(s) per process";
  if (!t.blas_library.empty()) text += ", " + t.blas_library + " " + std::to_string(t.blas);
  return text;
}

std::size_t cuda_device_count() { return torch::cuda::device_count(); }

}  // namespace atl
