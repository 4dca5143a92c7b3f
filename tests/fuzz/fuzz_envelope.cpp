// Fuzzes the single ingress point: bytes as an envelope frame, then cluster fencing.
// Any crash, sanitizer report or escaped exception is a bug.
#include <cstdint>

#include "runtime/transport/wire.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  atl::wire::frames frames{atl::wire::bytes(data, data + size)};
  auto msg = atl::wire::decode(std::move(frames), atl::wire::limits{});
  if (!msg) return 0;
  (void)atl::wire::check_cluster(**msg, "c");
  (void)atl::wire::kind_name((*msg)->kind());
  // Read the lists actors read, with the generated getters: decode() promised they are sound.
  const auto env = (*msg)->envelope();
  for (auto t : env.getTensors())
    for (auto d : t.getShape()) (void)d;
  if (env.isHeartbeat())
    for (auto v : env.getHeartbeat().getRefused()) (void)v;
  if (env.isHello())
    for (auto d : env.getHello().getDevices()) (void)d.size();
  if (env.isWelcome())
    for (auto w : env.getWelcome().getWorkers()) (void)w.getId().size();
  return 0;
}
