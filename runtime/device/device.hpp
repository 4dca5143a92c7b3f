#pragma once
// The devices a node's workers train on (`atoll join --devices cpu,cuda:0,...`): parsing
// and the start-up decision whether this build and machine can run them. Pure: the
// caller gathers what LibTorch and the driver report, so the decision is tested
// table-driven on machines without a GPU (tests/unit/device_test.cpp).
#include <cstddef>
#include <string>
#include <vector>

#include "runtime/core/expected.hpp"

namespace atl {

struct device_spec {
  enum class kind { cpu, cuda };
  kind type = kind::cpu;
  int index = 0;  // cuda only
  std::string name() const;  // "cpu", "cuda:0"
  bool operator==(const device_spec& o) const { return type == o.type && index == o.index; }
};

// "cpu" or "cuda:N" (N a decimal ordinal below 1024). Anything else: errc::invalid_config.
expected<device_spec> parse_device(const std::string& text);

// What this process can train on, as reported at start-up.
struct device_inventory {
  std::size_t torch_cuda_devices = 0;  // CUDA devices the linked LibTorch sees (0: a CPU-only LibTorch)
  bool cuda_codecs = false;  // this build has the CUDA codec kernels (nvcc was found)
  std::vector<std::size_t> free_bytes;  // per CUDA ordinal, as the driver reports; may be shorter
};

// Workers need at least this much free device memory to start (the default GPT alone
// needs a few MiB; a device this full is taken by someone else).
constexpr std::size_t min_free_device_bytes = std::size_t{256} << 20;

// Parses a comma-separated list and checks each device against the inventory; the first
// problem is an errc::invalid_config naming the device and what to do about it.
expected<std::vector<device_spec>> plan_devices(const std::string& list, const device_inventory& inventory);

}  // namespace atl
