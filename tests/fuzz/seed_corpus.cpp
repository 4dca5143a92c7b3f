// Writes the fuzzers' structured seeds into DIR/<target>/: valid envelopes of several
// kinds, the hostile frames of tests/support/hostile_frames.hpp, and configs. Run once after a
// schema change and commit the output: ./build-fuzz/tests/fuzz/fuzz_seed_corpus tests/fuzz/corpus
#include <filesystem>
#include <fstream>
#include <iostream>

#include "runtime/process/config.hpp"
#include "runtime/transport/wire.hpp"
#include "tests/support/hostile_frames.hpp"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& dir, const std::string& name, const atl::wire::bytes& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

atl::wire::frames contribution() {
  atl::wire::outgoing out;
  out.envelope.setClusterId("c");
  out.envelope.setSender("worker/1.0");
  out.envelope.setReceiver("coord/0");
  out.envelope.setEpoch(2);
  auto c = out.envelope.initContribution();
  c.setRound(3);
  c.setCount(4);
  const float v[4] = {1, -2, 0.5f, 0};
  out.tensors.push_back(atl::wire::tensor::from_floats(v, 4));
  return atl::wire::encode(out);
}

atl::wire::frames hello() {
  atl::wire::outgoing out;
  out.envelope.setSender("node/pending-1");
  out.envelope.setReceiver("registry");
  auto h = out.envelope.initHello();
  h.initDevices(1).set(0, "cpu");
  h.setHostname("seed");
  return atl::wire::encode(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: fuzz_seed_corpus CORPUS_DIR\n";
    return 2;
  }
  const fs::path root = argv[1];
  const auto env = root / "fuzz_envelope";
  write(env, "contribution", contribution()[0]);
  write(env, "hello", hello()[0]);
  write(env, "deeply_nested", atl::testing::deeply_nested(40));
  write(env, "pointer_amplified", atl::testing::pointer_amplified(64, 64));
  write(env, "too_many_segments", atl::testing::too_many_segments(3));
  // Tensor seeds: float32, rank 1, shape {4}, size from the frame, correct checksum,
  // codec fp32/int8/fp4/topk32, chunk 2, count 4, then 16 bytes.
  const auto tensors = root / "fuzz_tensor_frames";
  auto frame = contribution()[1];
  for (std::uint8_t codec : {0, 3, 4, 6}) {
    std::vector<std::uint8_t> seed = {0, 1, 4, 0, 0, 0, 0, codec, 2, 0, 4, 0};
    seed.insert(seed.end(), frame.begin(), frame.end());
    write(tensors, "codec" + std::to_string(codec), seed);
  }
  const auto configs = root / "fuzz_config";
  const std::string text = atl::to_toml(atl::run_config{});
  write(configs, "default.toml", std::vector<std::uint8_t>(text.begin(), text.end()));
  const std::string override_text = "diloco.sync_every=25";
  write(configs, "override", std::vector<std::uint8_t>(override_text.begin(), override_text.end()));
  std::cout << "wrote seeds under " << root << "\n";
  return 0;
}
