// Fuzzes the config parser (TOML files and `--set key=value` overrides): every input is
// either a valid config or a typed error; nothing crashes or throws.
#include <cstdint>
#include <string>

#include "runtime/process/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto cfg = atl::parse_config_text(text, "fuzz");
  atl::run_config base;
  (void)atl::apply_override(base, text);
  // A config we accepted must survive its own TOML rendering (the head stores it so).
  if (cfg && !atl::parse_config_text(atl::to_toml(*cfg), "round trip")) __builtin_trap();
  return 0;
}
