// The inner optimizer's state handed from one replica to another (a warm joiner): the
// receiver then steps exactly as the giver does.
#include "training/inner_optimizer.hpp"

#include <gtest/gtest.h>

namespace atl {
namespace {

std::vector<torch::Tensor> parameters(const torch::Device& device) {
  torch::manual_seed(1);
  return {torch::randn({4, 3}).to(device).requires_grad_(), torch::randn({5}).to(device).requires_grad_()};
}

std::vector<torch::Tensor> copies(const std::vector<torch::Tensor>& from) {
  std::vector<torch::Tensor> out;
  for (const auto& p : from) out.push_back(p.detach().clone().requires_grad_());
  return out;
}

// Step k's gradients, the same for every optimizer that takes step k.
void step(inner_optimizer& opt, std::vector<torch::Tensor>& params, int k) {
  torch::manual_seed(100 + k);
  for (auto& p : params) p.mutable_grad() = torch::randn_like(p);
  opt.step(1e-2);
}

bool same_bits(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!torch::equal(a[i].cpu(), b[i].cpu())) return false;
  return true;
}

void hand_over_and_compare(const torch::Device& device) {
  run_config cfg;  // grad_clip 1, weight_decay 0.1
  auto giver_params = parameters(device);
  inner_optimizer giver(giver_params, cfg, device);
  for (int k = 0; k < 3; ++k) step(giver, giver_params, k);

  std::vector<float> state(giver.state_size());
  ASSERT_EQ(state.size(), 2u * (12 + 5));
  const auto adam_step = giver.read_state(state.data());
  EXPECT_EQ(adam_step, 3);

  auto warm_params = copies(giver_params), cold_params = copies(giver_params);
  inner_optimizer warm(warm_params, cfg, device), cold(cold_params, cfg, device);
  warm.write_state(state.data(), adam_step);
  std::vector<float> read_back(state.size());
  EXPECT_EQ(warm.read_state(read_back.data()), 3);
  EXPECT_EQ(read_back, state);

  auto giver_next = copies(giver_params);  // the giver's two next steps, on its own state
  for (int k = 3; k < 5; ++k) {
    step(giver, giver_params, k);
    step(warm, warm_params, k);
    step(cold, cold_params, k);
  }
  EXPECT_TRUE(same_bits(warm_params, giver_params)) << "the warm optimizer stepped unlike its giver";
  EXPECT_FALSE(same_bits(cold_params, giver_params)) << "fresh state steps alike: the test proves nothing";
}

TEST(InnerOptimizer, AStateHandedOverStepsExactlyAsItsGiverDoes) { hand_over_and_compare(torch::kCPU); }

// The fused kernel's state (CUDA, LibTorch 2.1 or newer) in the same layout.
TEST(InnerOptimizer, AStateHandedOverOnACudaDeviceStepsAsItsGiverDoes) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "needs a CUDA device (run by ./tools/dev gpu-test)";
  hand_over_and_compare(torch::Device(torch::kCUDA, 0));
}

}  // namespace
}  // namespace atl
