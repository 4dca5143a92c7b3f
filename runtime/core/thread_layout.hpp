#pragma once
// How a CPU worker spreads one step over its cores: LibTorch's intra-op threads (the
// element-wise and reduction kernels) and the BLAS library's own pool (the matrix
// products). Which layout is fastest depends on the machine and the model: on a 2-core
// machine PyTorch is fastest with one intra-op thread and the BLAS pool on both cores
// (docs/benchmarks.md, "Inner step"), elsewhere both on every core wins. So a worker
// whose layout the user left open tries the candidates over its first real steps and
// keeps the fastest (`layout_trial`); nothing here reads a clock or sets a thread.
//
//   warming_up --`warmup_steps` done--> trying (candidate i, pass p)
//   trying --each candidate ran `steps_per_stint` steps, `passes` times--> settled
//
// Each stint's first step is not timed (the pools resize and wake), the candidates take
// turns (pass after pass), so a slow spell of the machine does not fall on one of them,
// and each candidate's time is the median of its timed steps. Every layout uses at most
// `budget` cores at once (the BLAS pool runs inside the intra-op thread that calls it), so
// workers that split a node's cores keep to their shares whatever they pick.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

struct thread_layout {
  int torch = 1;  // LibTorch intra-op threads
  int blas = 1;  // the BLAS library's pool
  bool operator==(const thread_layout& o) const { return torch == o.torch && blas == o.blas; }
};

std::string to_string(const thread_layout& layout);  // "2x1": LibTorch 2, BLAS 1
// "TxB" with 1 <= T, B <= 1024; anything else is an invalid_config error naming it.
expected<thread_layout> parse_thread_layout(const std::string& text);

// The layouts a worker with `budget` cores tries, each used at most once: both pools on
// every core, one intra-op thread with the BLAS pool on every core, the reverse, and one
// thread for both. A budget of 1 leaves 1x1 alone.
std::vector<thread_layout> candidate_layouts(int budget);

struct layout_time {
  thread_layout layout;
  double seconds_per_step = 0;
};

// The fastest layout; one within `tolerance` (a fraction) of it that uses fewer threads
// (torch + blas) is preferred, since it leaves cores to the node's other actors for the
// same speed. Ties keep the earlier entry. `times` must not be empty.
thread_layout pick_layout(const std::vector<layout_time>& times, double tolerance = 0.03);

struct trial_plan {
  int warmup_steps = 5;  // before any timing: the allocator and caches settle
  int passes = 2;
  int steps_per_stint = 3;  // the first of which is not timed
};

class layout_trial {
 public:
  // `candidates`: at least one; the first is also the warm-up's. One alone is settled at once.
  layout_trial(std::vector<thread_layout> candidates, trial_plan plan = {});

  // The layout the next step must run with, or nullopt to keep the current one.
  std::optional<thread_layout> before_step();
  // That step took `seconds`.
  void after_step(double seconds);

  bool settled() const { return chosen_.has_value(); }
  std::optional<thread_layout> current() const { return current_; }  // the last before_step gave
  thread_layout chosen() const { return *chosen_; }  // once settled
  // Each candidate's median s/step, in candidate order (once settled).
  const std::vector<layout_time>& times() const { return times_; }
  // Steps the trial takes in all, warm-up included.
  int length() const;

 private:
  std::vector<thread_layout> candidates_;
  trial_plan plan_;
  int step_ = 0;  // steps done
  std::optional<thread_layout> current_;
  std::vector<std::vector<double>> samples_;  // per candidate
  std::vector<layout_time> times_;
  std::optional<thread_layout> chosen_;
};

// "2x2 (0.101 s/step; 1x2 0.105, 2x1 0.142, 1x1 0.150)": the choice and what it beat;
// "2x2" alone when there was one candidate.
std::string describe(const layout_trial& settled_trial);

// How a node process's CPU workers get their threads.
struct thread_plan_input {
  int cores = 1;  // of the machine
  int local_workers = 1;  // this process's workers, GPU ones included
  int cpu_workers = 1;  // of which on the CPU
  int process_threads = 0;  // `atoll join --threads`: the process's cores, shared; 0: not given
  int threads_per_worker = 0;  // run.threads_per_worker; 0: not given
  std::string layout = "auto";  // run.thread_layout, validated: auto or TxB
};
struct thread_plan {
  int budget = 1;  // cores each worker computes on (the process's default layout is budget x budget)
  std::vector<thread_layout> layouts;  // each CPU worker tries these (one: fixed; none: no CPU worker)
};
// The budget: the process's --threads split among its workers, else run.threads_per_worker,
// else the machine's cores split among them. The layouts: the user's TxB if given; else
// the candidates within the budget for a CPU worker alone in its process; several share
// the process's one BLAS pool, so they keep budget x budget.
expected<thread_plan> plan_threads(const thread_plan_input& in);

}  // namespace atl
