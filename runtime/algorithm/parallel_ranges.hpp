#pragma once
// Splits the work over a large tensor between threads, for the codecs and the outer step.
// Each range starts at a multiple of `step` (a codec's chunk), so a range's scales and
// bytes are its own. Small tensors stay on the calling thread: a thread costs more than
// the work below a few million values.
#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

namespace atl {

// Tensors of at least this many values are split between threads.
constexpr std::size_t parallel_threshold = std::size_t{1} << 22;

// Runs fn(begin, end) over [0, n) in step-aligned ranges, one per hardware thread for
// large n. fn must be safe to run on several ranges at once.
template <class Fn>
void parallel_ranges(std::size_t n, std::size_t step, Fn fn) {
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  if (n < parallel_threshold || hw == 1 || step == 0) {
    fn(std::size_t{0}, n);
    return;
  }
  const std::size_t steps = (n + step - 1) / step;
  const std::size_t per = (steps + hw - 1) / hw;
  std::vector<std::thread> threads;
  for (std::size_t s = 0; s < steps; s += per) threads.emplace_back(fn, s * step, std::min(n, (s + per) * step));
  for (auto& t : threads) t.join();
}

}  // namespace atl
