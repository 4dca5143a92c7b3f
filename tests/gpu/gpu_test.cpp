// gpu tier, in one process: the device codecs against the host ones, and the LibTorch
// replica on cuda:0 (its theta_global, residuals and encodings on the device).
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "runtime/device/codec_cuda.hpp"
#include "tests/support/gpu_skip.hpp"
#include "tests/support/random_values.hpp"
#include "training/external_replica.hpp"
#include "training/tasks.hpp"

namespace atl {
namespace {

using testing::random_values;

torch::Tensor on_gpu(const std::vector<float>& v) {
  return torch::from_blob(const_cast<float*>(v.data()), {static_cast<std::int64_t>(v.size())}, torch::kFloat32)
      .to(torch::Device("cuda:0"));
}

std::vector<float> to_host(const torch::Tensor& t) {
  auto c = t.to(torch::kCPU).contiguous();
  return std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + c.numel());
}

TEST(DeviceCodec, EncodesAndFeedsBackTheSameBytesAsTheHostOverSeveralRounds) {
  ATOLL_SKIP_WITHOUT_GPU();
  for (auto kind : {codec_kind::fp32, codec_kind::bf16, codec_kind::fp16, codec_kind::int8, codec_kind::fp4,
                    codec_kind::topk16, codec_kind::topk32, codec_kind::topk64})
    for (std::size_t n : {1u, 255u, 257u, 4099u, 1000003u}) {
      const auto global = random_values(n, static_cast<unsigned>(n), 1.0f);
      error_feedback host;
      device_codec device;
      auto residual = torch::zeros({static_cast<std::int64_t>(n)}, torch::TensorOptions().device("cuda:0"));
      auto g = on_gpu(global);
      for (unsigned round = 0; round < 3; ++round) {
        auto local = random_values(n, static_cast<unsigned>(n) * 7 + round, 1.0f);
        if (n > 10) local[3] = global[3], local[9] = global[9] - 1e-30f;  // a zero and a tiny delta
        std::vector<float> delta(n);
        for (std::size_t i = 0; i < n; ++i) delta[i] = global[i] - local[i];
        encoded_values want, got;
        ASSERT_FALSE(host.encode(kind, delta.data(), n, 256, want));
        auto l = on_gpu(local);
        ASSERT_FALSE(device.encode_delta(kind, g.data_ptr<float>(), l.data_ptr<float>(), residual.data_ptr<float>(), n,
                                         256, nullptr, got));
        const std::string where =
            std::string(to_string(kind)) + " n=" + std::to_string(n) + " round " + std::to_string(round);
        ASSERT_EQ(want.payload, got.payload) << where;
        ASSERT_EQ(want.scales, got.scales) << where;
        const auto r = to_host(residual);
        ASSERT_EQ(0, std::memcmp(r.data(), host.residual().data(), n * 4)) << where;
        // Decoding on the device gives the host's values.
        std::vector<float> a(n);
        ASSERT_FALSE(decode(want, a.data()));
        auto b = torch::full({static_cast<std::int64_t>(n)}, std::nanf(""), torch::TensorOptions().device("cuda:0"));
        ASSERT_FALSE(device.decode(got, b.data_ptr<float>(), nullptr));
        ASSERT_EQ(0, std::memcmp(a.data(), to_host(b).data(), n * 4)) << where;
      }
    }
}

// Ties are where a sparse selection can differ: equal magnitudes, zeros, fewer non-zeros
// than a chunk keeps, chunk sizes that are not a multiple of the kept count.
TEST(DeviceCodec, SparseCodecsKeepTheHostsValuesWhereMagnitudesTie) {
  ATOLL_SKIP_WITHOUT_GPU();
  std::vector<float> values(1024 + 77, 0.0f);
  for (std::size_t i = 0; i < 256; ++i) values[i] = i % 2 ? 0.5f : -0.5f;  // all equal magnitudes
  values[512 + 7] = 3.0f, values[512 + 200] = -1.0f;  // chunk 2: two non-zeros (chunk 1: zeros)
  for (std::size_t i = 768; i < values.size(); ++i) values[i] = static_cast<float>(static_cast<int>(i * 7 % 5) - 2);
  for (auto kind : {codec_kind::topk16, codec_kind::topk32, codec_kind::topk64})
    for (std::size_t chunk : {256u, 100u, 17u, 1u}) {
      const std::string where = std::string(to_string(kind)) + " chunk " + std::to_string(chunk);
      encoded_values want, got;
      ASSERT_FALSE(encode(kind, values.data(), values.size(), chunk, want)) << where;
      device_codec device;
      auto on_device = on_gpu(values);
      ASSERT_FALSE(device.encode(kind, on_device.data_ptr<float>(), values.size(), chunk, nullptr, got)) << where;
      EXPECT_EQ(want.payload, got.payload) << where;
      EXPECT_EQ(want.scales, got.scales) << where;
      std::vector<float> a(values.size());
      ASSERT_FALSE(decode(want, a.data()));
      ASSERT_FALSE(device.decode(got, on_device.data_ptr<float>(), nullptr)) << where;
      EXPECT_EQ(0, std::memcmp(a.data(), to_host(on_device).data(), a.size() * 4)) << where;
    }
}

TEST(DeviceCodec, RefusesNonFiniteValuesAndKeepsTheResidual) {
  ATOLL_SKIP_WITHOUT_GPU();
  for (auto kind : {codec_kind::fp32, codec_kind::bf16, codec_kind::int8, codec_kind::fp4, codec_kind::topk32}) {
    auto global = random_values(1000, 1, 1.0f);
    auto local = random_values(1000, 2, 1.0f);
    device_codec device;
    auto residual = on_gpu(random_values(1000, 3, 0.01f));
    const auto before = to_host(residual);
    local[500] = std::numeric_limits<float>::infinity();
    auto g = on_gpu(global), l = on_gpu(local);
    encoded_values out;
    const auto err = device.encode_delta(kind, g.data_ptr<float>(), l.data_ptr<float>(), residual.data_ptr<float>(),
                                         1000, 256, nullptr, out);
    EXPECT_EQ(err.code, errc::not_finite) << to_string(kind);
    EXPECT_EQ(to_host(residual), before) << to_string(kind);
  }
}

TEST(DeviceCodec, RefusesMalformedCodesBeforeTouchingTheDevice) {
  ATOLL_SKIP_WITHOUT_GPU();
  device_codec device;
  auto out = torch::zeros({100}, torch::TensorOptions().device("cuda:0"));
  encoded_values bad;
  bad.kind = codec_kind::int8;
  bad.count = 100;
  bad.chunk = 256;
  bad.payload.assign(99, 0);  // one byte short
  bad.scales.assign(1, 1.0f);
  EXPECT_EQ(device.decode(bad, out.data_ptr<float>(), nullptr).code, errc::tensor_mismatch);
  bad.payload.assign(100, 0);
  bad.scales.assign(1, std::nanf(""));
  EXPECT_EQ(device.decode(bad, out.data_ptr<float>(), nullptr).code, errc::not_finite);
  // A sparse payload whose positions repeat would write one value twice.
  std::vector<float> values(100, 1.0f);
  encoded_values sparse;
  ASSERT_FALSE(encode(codec_kind::topk16, values.data(), values.size(), 64, sparse));
  ASSERT_EQ(kept_per_chunk(codec_kind::topk16, 64), 4u);
  sparse.payload[1] = sparse.payload[0];
  EXPECT_EQ(device.decode(sparse, out.data_ptr<float>(), nullptr).code, errc::tensor_mismatch);
}

run_config small_gpt() {
  run_config cfg;
  cfg.layers = 2;
  cfg.width = 64;
  cfg.heads = 4;
  cfg.context = 32;
  cfg.batch_size = 8;
  cfg.eval_batches = 2;
  cfg.fragments = 2;
  return cfg;
}

std::vector<float> fragment_of(replica& r, std::size_t f) {
  std::vector<float> v(r.fragment_size(f));
  r.read_fragment(f, v.data());
  return v;
}

TEST(TorchReplica, OnCudaKeepsTheGlobalStateAndEncodesOnTheDevice) {
  ATOLL_SKIP_WITHOUT_GPU();
  replica_spec spec;
  spec.device = "cuda:0";
  auto r = torch_replica_factory()(small_gpt(), spec);
  ASSERT_EQ(r->fragment_count(), 2u);
  std::vector<std::vector<float>> global;
  for (std::size_t f = 0; f < 2; ++f) {
    global.push_back(fragment_of(*r, f));
    r->adopt_global(f, global[f].data());
  }
  const replica::encoding int8_ef{codec_kind::int8, 256, true};
  encoded_values enc;
  ASSERT_FALSE(r->encode_pseudo_gradient(0, int8_ef, enc));
  EXPECT_EQ(enc.count, global[0].size());
  EXPECT_TRUE(std::all_of(enc.payload.begin(), enc.payload.end(), [](std::uint8_t b) { return b == 0; }))
      << "local == global: the pseudo-gradient is zero";
  EXPECT_FLOAT_EQ(r->evaluate_global(), r->evaluate());

  for (std::int64_t step = 0; step < 5; ++step) EXPECT_TRUE(std::isfinite(r->train_step(step).loss));
  ASSERT_FALSE(r->encode_pseudo_gradient(0, int8_ef, enc));
  EXPECT_FALSE(std::all_of(enc.payload.begin(), enc.payload.end(), [](std::uint8_t b) { return b == 0; }));
  // The codes are global - local, as the host computes them from the same values.
  const auto local = fragment_of(*r, 0);
  std::vector<float> delta(local.size()), decoded(local.size());
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = global[0][i] - local[i];
  encoded_values want;
  ASSERT_FALSE(encode(codec_kind::int8, delta.data(), delta.size(), 256, want));
  EXPECT_EQ(want.payload, enc.payload);
  EXPECT_EQ(want.scales, enc.scales);

  // evaluate_global sees the global state and leaves the trained one in place.
  const float trained = r->evaluate();
  EXPECT_NE(r->evaluate_global(), trained);
  EXPECT_EQ(fragment_of(*r, 0), local);
  // A plain DiLoCo merge (alpha 0) installs the global bytes exactly; alpha 0.5 blends.
  r->merge_global(1, global[1].data(), 0.5f);
  const auto blended = fragment_of(*r, 1);
  r->merge_global(0, global[0].data(), 0.0f);
  EXPECT_EQ(fragment_of(*r, 0), global[0]);
  EXPECT_NE(blended, global[1]);
}

TEST(TorchReplica, ACudaAndACpuReplicaComputeTheSameFirstLoss) {
  ATOLL_SKIP_WITHOUT_GPU();
  replica_spec cpu, gpu;
  gpu.device = "cuda:0";
  auto a = torch_replica_factory()(small_gpt(), cpu);
  auto b = torch_replica_factory()(small_gpt(), gpu);
  for (std::size_t f = 0; f < 2; ++f) EXPECT_EQ(fragment_of(*a, f), fragment_of(*b, f)) << "same seed, same init";
  const float la = a->train_step(0).loss, lb = b->train_step(0).loss;
  EXPECT_NEAR(la, lb, 1e-3 * std::fabs(la));
}

// A CUDA replica returns with its step queued and reports the loss of the step before;
// finish_queued_step waits for the last one. The CPU replica's losses are the reference:
// CPU and CUDA arithmetic differ by far less than the 1% tolerance, a step by over 5%.
TEST(TorchReplica, OnCudaAStepsLossIsReportedWithTheNextStep) {
  ATOLL_SKIP_WITHOUT_GPU();
  auto cfg = small_gpt();
  cfg.warmup_steps = 0;  // full steps from the first, so that each step moves the loss
  cfg.lr = 1e-2;
  replica_spec cpu, gpu;
  gpu.device = "cuda:0";
  auto reference = torch_replica_factory()(cfg, cpu);
  auto r = torch_replica_factory()(cfg, gpu);
  std::vector<float> want, got;
  for (std::int64_t step = 0; step < 4; ++step) {
    want.push_back(reference->train_step(step).loss);
    got.push_back(r->train_step(step).loss);
  }
  EXPECT_FALSE(reference->finish_queued_step()) << "a CPU step is done when train_step returns";
  const auto last = r->finish_queued_step();
  ASSERT_TRUE(last);
  const std::vector<float> expected{want[0], want[0], want[1], want[2]};
  for (std::size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-2 * std::fabs(expected[i])) << "step " << i;
    if (i > 0) {
      EXPECT_GT(std::fabs(want[i] - want[i - 1]), 5e-2 * std::fabs(want[i])) << "the test tells steps apart";
    }
  }
  EXPECT_NEAR(*last, want[3], 1e-2 * std::fabs(want[3]));
}

// ATOLL_TORCH_PROFILE on a CUDA replica: a Kineto trace of the window's steps, with the
// device's kernels in it (what tools/bench/gpu_trace.py reads).
TEST(TorchReplica, AProfiledWindowTracesTheStepsKernels) {
  ATOLL_SKIP_WITHOUT_GPU();
  const std::string path = ::testing::TempDir() + "gpu_step_profile.json";
  std::remove(path.c_str());
  ASSERT_EQ(setenv("ATOLL_TORCH_PROFILE", ("1:2:" + path).c_str(), 1), 0);
  {
    replica_spec gpu;
    gpu.device = "cuda:0";
    auto r = torch_replica_factory()(small_gpt(), gpu);
    unsetenv("ATOLL_TORCH_PROFILE");
    for (std::int64_t step = 0; step < 4; ++step) r->train_step(step);
    r->finish_queued_step();
  }
  std::ifstream in(path);
  ASSERT_TRUE(in) << "no trace at " << path;
  const std::string trace((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(trace.find("\"kernel\""), std::string::npos) << "the trace holds the device's kernels";
  EXPECT_NE(trace.find("aten::"), std::string::npos) << "and the host's ops";
}

// The Python API's replica with the user's parameters on cuda:0: theta_global, the
// residual and the encode on the device (the host's bytes), merges marking what they
// wrote, and the run's end leaving theta_global in the user's tensors.
TEST(ExternalReplica, OnCudaSyncsOnTheDeviceAndTheUserEndsWithThetaGlobal) {
  ATOLL_SKIP_WITHOUT_GPU();
  const torch::Device cuda("cuda:0");
  auto model = std::make_shared<external_model>();
  model->groups = {{torch::randn({64, 32}, cuda), torch::randn({64}, cuda)}, {torch::randn({300}, cuda)}};
  model->names = {{"fc1.weight", "fc1.bias"}, {"fc2.bias"}};
  ASSERT_FALSE(check_external_model(*model));
  run_config cfg;
  cfg.fragments = 2;
  auto r = external_replica_factory(model)(cfg, replica_spec{});
  ASSERT_EQ(r->fragment_count(), 2u);
  std::vector<std::vector<float>> global;
  for (std::size_t f = 0; f < 2; ++f) {
    global.push_back(fragment_of(*r, f));
    r->adopt_global(f, global[f].data());
  }
  EXPECT_EQ(model->written.take().size(), 2u) << "adopting writes both groups";
  {
    torch::NoGradGuard no_grad;
    for (auto& g : model->groups)
      for (auto& p : g) p.add_(torch::randn_like(p) * 0.01);  // the user's steps
  }
  const replica::encoding int8_ef{codec_kind::int8, 256, true};
  encoded_values enc;
  ASSERT_FALSE(r->encode_pseudo_gradient(0, int8_ef, enc));
  const auto local = fragment_of(*r, 0);
  std::vector<float> delta(local.size());
  for (std::size_t i = 0; i < delta.size(); ++i) delta[i] = global[0][i] - local[i];
  encoded_values want;
  ASSERT_FALSE(encode(codec_kind::int8, delta.data(), delta.size(), 256, want));
  EXPECT_EQ(want.payload, enc.payload) << "the device encodes the host's bytes";
  EXPECT_EQ(want.scales, enc.scales);

  r->merge_global(1, global[1].data(), 0.0f);
  EXPECT_EQ(fragment_of(*r, 1), global[1]);
  EXPECT_EQ(model->written.take(), std::vector<std::size_t>{1});
  r->finish_queued_step();
  EXPECT_EQ(fragment_of(*r, 0), global[0]) << "the run's end: theta_global in the user's tensors";
  EXPECT_EQ(model->written.take().size(), 2u);

  model->groups[1][0] = torch::zeros({300});  // on the host, beside device tensors
  EXPECT_EQ(check_external_model(*model).code, errc::invalid_config);
}

}  // namespace
}  // namespace atl
