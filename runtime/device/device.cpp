#include "runtime/device/device.hpp"

namespace atl {

std::string device_spec::name() const { return type == kind::cpu ? "cpu" : "cuda:" + std::to_string(index); }

expected<device_spec> parse_device(const std::string& text) {
  if (text == "cpu") return device_spec{};
  const std::string prefix = "cuda:";
  const auto bad = [&] {
    return make_error(errc::invalid_config, "unknown device '" + text + "' (use cpu or cuda:N)");
  };
  if (text.rfind(prefix, 0) != 0 || text.size() == prefix.size() || text.size() > prefix.size() + 4) return bad();
  int index = 0;
  for (std::size_t i = prefix.size(); i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return bad();
    index = index * 10 + (text[i] - '0');
  }
  if (index >= 1024) return bad();
  return device_spec{device_spec::kind::cuda, index};
}

namespace {

status check(const device_spec& d, const device_inventory& inv) {
  if (d.type == device_spec::kind::cpu) return {};
  const auto ordinal = static_cast<std::size_t>(d.index);
  if (inv.torch_cuda_devices == 0)
    return make_error(errc::invalid_config,
                      "device " + d.name() +
                          ": this LibTorch sees no CUDA device (a CPU-only LibTorch, such as Debian's, or no GPU "
                          "here); build with -DATOLL_TORCH_DIR pointing at a CUDA LibTorch (README: GPU nodes)");
  if (ordinal >= inv.torch_cuda_devices)
    return make_error(
        errc::invalid_config,
        "device " + d.name() + " does not exist (LibTorch sees " + std::to_string(inv.torch_cuda_devices) +
            " CUDA device(s): cuda:0" +
            (inv.torch_cuda_devices > 1 ? " to cuda:" + std::to_string(inv.torch_cuda_devices - 1) : std::string()) +
            ")");
  if (!inv.cuda_codecs)
    return make_error(errc::invalid_config,
                      "device " + d.name() +
                          ": this build has no CUDA codec kernels (nvcc was not found when "
                          "it was configured); rebuild with nvcc on the PATH or in /usr/local/cuda");
  if (ordinal < inv.free_bytes.size() && inv.free_bytes[ordinal] < min_free_device_bytes)
    return make_error(errc::invalid_config, "device " + d.name() + " has only " +
                                                std::to_string(inv.free_bytes[ordinal] >> 20) + " MiB free (at least " +
                                                std::to_string(min_free_device_bytes >> 20) + " MiB needed)");
  return {};
}

}  // namespace

expected<std::vector<device_spec>> plan_devices(const std::string& list, const device_inventory& inventory) {
  std::vector<device_spec> out;
  std::string item;
  for (const char c : list + ",") {
    if (c != ',') {
      item += c;
      continue;
    }
    if (item.empty()) return make_error(errc::invalid_config, "--devices '" + list + "' has an empty entry");
    auto d = parse_device(item);
    if (!d) return d.err();
    if (auto err = check(*d, inventory)) return err;
    out.push_back(*d);
    item.clear();
  }
  return out;
}

}  // namespace atl
