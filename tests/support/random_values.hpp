#pragma once
// Seeded Gaussian test values (mean 0, standard deviation `spread`), for the codec tests.
#include <random>
#include <vector>

namespace atl::testing {

inline std::vector<float> random_values(std::size_t n, unsigned seed, float spread = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, spread);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

}  // namespace atl::testing
