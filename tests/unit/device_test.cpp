// The start-up decision on a node's devices (runtime/device/device.hpp), one row per case.
#include <gtest/gtest.h>

#include "runtime/device/device.hpp"

namespace atl {
namespace {

TEST(Device, NamesParseIntoDevicesAndAnythingElseIsATypedError) {
  struct row {
    const char* text;
    bool ok;
    device_spec::kind type;
    int index;
  };
  const row rows[] = {
      {"cpu", true, device_spec::kind::cpu, 0},
      {"cuda:0", true, device_spec::kind::cuda, 0},
      {"cuda:17", true, device_spec::kind::cuda, 17},
      {"cuda:1023", true, device_spec::kind::cuda, 1023},
      {"cuda:1024", false, {}, 0},
      {"cuda", false, {}, 0},
      {"cuda:", false, {}, 0},
      {"cuda:-1", false, {}, 0},
      {"cuda:0x1", false, {}, 0},
      {"cuda:99999999999", false, {}, 0},
      {"CPU", false, {}, 0},
      {"gpu0", false, {}, 0},
      {"", false, {}, 0},
      {" cpu", false, {}, 0},
  };
  for (const auto& r : rows) {
    const auto d = parse_device(r.text);
    ASSERT_EQ(bool(d), r.ok) << "'" << r.text << "'";
    if (!r.ok) {
      EXPECT_EQ(d.err().code, errc::invalid_config) << r.text;
      EXPECT_NE(d.err().message.find(std::string("'") + r.text + "'"), std::string::npos) << d.err().message;
      continue;
    }
    EXPECT_EQ(d->type, r.type) << r.text;
    EXPECT_EQ(d->index, r.index) << r.text;
    EXPECT_EQ(d->name(), r.text);
  }
}

TEST(Device, APlanIsRefusedWithTheReasonForTheFirstDeviceThatCannotRun) {
  const std::size_t gib = std::size_t{1} << 30;
  const device_inventory cpu_only{};  // Debian's LibTorch
  const device_inventory one_gpu{1, true, {80 * gib}};
  const device_inventory no_kernels{1, false, {80 * gib}};  // built without nvcc
  const device_inventory full_gpu{1, true, {100 << 20}};
  const device_inventory two_gpus{2, true, {80 * gib, 80 * gib}};
  struct row {
    const char* list;
    const device_inventory& inventory;
    std::size_t workers;  // when accepted
    const char* reason;  // a piece of the message when refused
  };
  const row rows[] = {
      {"cpu", cpu_only, 1, nullptr},
      {"cpu,cpu", cpu_only, 2, nullptr},
      {"cuda:0", one_gpu, 1, nullptr},
      {"cpu,cuda:0", one_gpu, 2, nullptr},
      {"cuda:0,cuda:1", two_gpus, 2, nullptr},
      {"cuda:0", cpu_only, 0, "sees no CUDA device"},
      {"cuda:1", one_gpu, 0, "does not exist (LibTorch sees 1 CUDA device(s): cuda:0)"},
      {"cuda:2", two_gpus, 0, "cuda:0 to cuda:1"},
      {"cuda:0", no_kernels, 0, "no CUDA codec kernels"},
      {"cuda:0", full_gpu, 0, "has only 100 MiB free"},
      {"cpu,gpu", one_gpu, 0, "unknown device 'gpu'"},
      {"cpu,,cpu", one_gpu, 0, "empty entry"},
      {"", one_gpu, 0, "empty entry"},
  };
  for (const auto& r : rows) {
    const auto plan = plan_devices(r.list, r.inventory);
    if (!r.reason) {
      ASSERT_TRUE(plan) << r.list << ": " << plan.err().describe();
      EXPECT_EQ(plan->size(), r.workers) << r.list;
      continue;
    }
    ASSERT_FALSE(plan) << r.list;
    EXPECT_EQ(plan.err().code, errc::invalid_config);
    EXPECT_NE(plan.err().message.find(r.reason), std::string::npos) << r.list << ": " << plan.err().message;
  }
}

}  // namespace
}  // namespace atl
