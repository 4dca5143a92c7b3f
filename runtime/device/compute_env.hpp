#pragma once
// The environment a training process needs before its libraries load.
//
// LibTorch's OpenMP threads and OpenBLAS's pthreads both spin when idle: libgomp for about
// 300,000 iterations after each parallel region, OpenBLAS for about 2^28 cycles after each
// call. With two pools in one process they spin on the cores the other pool needs, and two
// LibTorch threads trained slower than one (tools/bench/step.py measures it). Both
// libraries read their spin settings once, when they load, so a process that trains
// (`atoll join`, the bare step benchmark) re-executes itself once with them set.
// A value the user set is never replaced.
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace atl {

using env_lookup = std::function<const char*(const char* name)>;
using env_settings = std::vector<std::pair<std::string, std::string>>;

// The variables to add, given the current environment (empty: nothing to do, including
// after the re-execution, which is marked by ATOLL_COMPUTE_ENV).
env_settings missing_compute_env(const env_lookup& getenv);

// glibc's allocator, tuned for a process that allocates and frees the same large tensors
// every step on a thread other than main: such a thread's arena shrinks its heap whenever
// the top is free (and, with a fixed trim threshold alone, large blocks would be mmap'd
// and unmapped every time), so each step page-faulted its activations in again (about
// 15 ms of system time per step of the default model). Every block now comes from the
// heaps (mmap is off: a 64 MiB fragment's frames were faulted in and unmapped at every hop),
// of one arena shared by every thread (a thread's own arena unmaps its heaps too), and up
// to 512 MiB of free heap is kept. Called by `atoll join` and `atoll up` (the head's
// keeper receives fragment-sized commits) before any thread starts.
void tune_allocator_for_training();

// Sets what missing_compute_env() names and re-executes this program with the same
// arguments. Returns only when nothing was missing, or when the exec failed (then the
// process carries on with the libraries' defaults; the reason is logged).
void reexec_with_compute_env(char** argv);

}  // namespace atl
