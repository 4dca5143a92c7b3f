// The replica seen in sync units (actors/worker/sliced_replica.hpp): its units are the
// fragments' slices, and what the worker does unit by unit reaches the model as if it had
// been done to whole fragments.
#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

#include "actors/worker/sliced_replica.hpp"
#include "tests/support/random_values.hpp"

namespace atl {
namespace {

// Parameters in a vector, cut into fragments of the given sizes; a step moves each one by
// a seeded amount. The outer-sync side is replica's own host implementation.
class vector_replica : public replica {
 public:
  explicit vector_replica(std::vector<std::size_t> sizes) {
    bounds_.push_back(0);
    for (auto s : sizes) bounds_.push_back(bounds_.back() + s);
    params_ = testing::random_values(bounds_.back(), 5);
  }
  std::size_t fragment_count() const override { return bounds_.size() - 1; }
  std::size_t fragment_size(std::size_t f) const override { return bounds_[f + 1] - bounds_[f]; }
  void read_fragment(std::size_t f, float* v) const override {
    std::memcpy(v, params_.data() + bounds_[f], fragment_size(f) * sizeof(float));
  }
  void write_fragment(std::size_t f, const float* v) override {
    std::memcpy(params_.data() + bounds_[f], v, fragment_size(f) * sizeof(float));
  }
  step_result train_step(std::int64_t step) override {
    const auto drift = testing::random_values(params_.size(), 100 + static_cast<unsigned>(step), 0.01f);
    for (std::size_t i = 0; i < params_.size(); ++i) params_[i] -= drift[i];
    return {0.0f, 1};
  }
  step_result compute_gradients(std::int64_t) override { return {0.0f, 1}; }
  void read_gradients(std::size_t, float*) const override {}
  void write_gradients(std::size_t, const float*) override {}
  void apply_gradients(std::int64_t) override {}
  float evaluate() override { return params_[0]; }
  const std::vector<float>& params() const { return params_; }

 private:
  std::vector<std::size_t> bounds_;
  std::vector<float> params_;
};

constexpr std::size_t granule = 16384;

struct pair_of_replicas {
  vector_replica* plain;  // owned by `whole`
  vector_replica* inner;  // owned by `sliced`
  std::unique_ptr<replica> whole, sliced;
};

// The same model twice: one as it is, one seen in `shards` units a fragment.
pair_of_replicas two_replicas(const std::vector<std::size_t>& sizes, std::size_t shards) {
  auto plain = std::make_unique<vector_replica>(sizes);
  auto inner = std::make_unique<vector_replica>(sizes);
  pair_of_replicas p{plain.get(), inner.get(), std::move(plain), nullptr};
  auto sliced = sliced_replica::wrap(std::move(inner), shards, granule);
  EXPECT_TRUE(sliced) << sliced.err().describe();
  if (sliced) p.sliced = std::move(*sliced);
  return p;
}

const sliced_replica& as_sliced(const pair_of_replicas& p) { return static_cast<const sliced_replica&>(*p.sliced); }

// Every fragment's theta_global: the same on both, given whole to one and unit by unit to
// the other.
void adopt_on_both(pair_of_replicas& p, const std::vector<std::vector<float>>& global) {
  for (std::size_t f = 0; f < global.size(); ++f) p.whole->adopt_global(f, global[f].data());
  for (std::size_t u = 0; u < p.sliced->fragment_count(); ++u) {
    const auto& s = as_sliced(p).slice_of(u);
    p.sliced->adopt_global(u, global[as_sliced(p).fragment_of(u)].data() + s.first);
  }
}

std::vector<std::vector<float>> globals_of(const std::vector<std::size_t>& sizes, unsigned seed) {
  std::vector<std::vector<float>> g;
  for (auto s : sizes) g.push_back(testing::random_values(s, seed++));
  return g;
}

TEST(SlicedReplica, ItsUnitsAreEachFragmentsSlicesInOrder) {
  auto p = two_replicas({2 * granule + 100, 3 * granule}, 2);
  ASSERT_TRUE(p.sliced);
  ASSERT_EQ(p.sliced->fragment_count(), 4u);
  // Three granules a fragment (the first's third is 100 values): the first slice takes two.
  const std::vector<std::size_t> fragment = {0, 0, 1, 1};
  const std::vector<fragment_slice> slices = {
      {0, 2 * granule}, {2 * granule, 100}, {0, 2 * granule}, {2 * granule, granule}};
  for (std::size_t u = 0; u < 4; ++u) {
    EXPECT_EQ(as_sliced(p).fragment_of(u), fragment[u]) << u;
    EXPECT_EQ(as_sliced(p).slice_of(u), slices[u]) << u;
    EXPECT_EQ(p.sliced->fragment_size(u), slices[u].count) << u;
  }
  std::vector<float> unit(100);
  p.sliced->read_fragment(1, unit.data());
  EXPECT_EQ(std::memcmp(unit.data(), p.inner->params().data() + 2 * granule, unit.size() * sizeof(float)), 0);
  std::vector<float> last(granule);
  p.sliced->read_fragment(3, last.data());
  EXPECT_EQ(std::memcmp(last.data(), p.inner->params().data() + 4 * granule + 100, last.size() * sizeof(float)), 0);
}

TEST(SlicedReplica, AFragmentWithFewerGranulesThanShardsIsRefusedNamingIt) {
  auto sliced =
      sliced_replica::wrap(std::make_unique<vector_replica>(std::vector<std::size_t>{3 * granule, 1000}), 2, granule);
  ASSERT_FALSE(sliced);
  EXPECT_EQ(sliced.err().code, errc::invalid_config);
  EXPECT_NE(sliced.err().message.find("fragment 1 has 1000 values"), std::string::npos) << sliced.err().message;
}

TEST(SlicedReplica, AWorkerSeesItsModelInUnitsOnlyWithShards) {
  run_config run;
  auto model = std::make_unique<vector_replica>(std::vector<std::size_t>{2 * granule});
  const replica* plain = model.get();
  auto same = in_sync_units(std::move(model), run);  // diloco.shards = 1
  EXPECT_EQ(same.get(), plain);
  run.shards = 2;
  EXPECT_EQ(in_sync_units(std::move(same), run)->fragment_count(), 2u);
  run.shards = 3;
  EXPECT_THROW(in_sync_units(std::make_unique<vector_replica>(std::vector<std::size_t>{2 * granule}), run),
               std::invalid_argument);
}

// Error feedback over three syncs: the units' contributions are the cuts of what the whole
// fragment encodes, sync after sync (the residual was updated once a sync, not once a unit).
TEST(SlicedReplica, AContributionIsTheWholeFragmentsEncodingCutOncePerSync) {
  const std::vector<std::size_t> sizes = {3 * granule + 7, 2 * granule};
  auto p = two_replicas(sizes, 2);
  ASSERT_TRUE(p.sliced);
  adopt_on_both(p, globals_of(sizes, 1));
  const replica::encoding how{codec_kind::int8, 256, true};
  for (std::int64_t step = 1; step <= 3; ++step) {
    p.whole->train_step(step);
    p.sliced->train_step(step);
    for (std::size_t f = 0; f < sizes.size(); ++f) {
      encoded_values whole;
      ASSERT_FALSE(p.whole->encode_pseudo_gradient(f, how, whole));
      for (std::size_t s : {std::size_t{1}, std::size_t{0}}) {  // in any order
        const std::size_t u = f * 2 + s;
        encoded_values unit;
        ASSERT_FALSE(p.sliced->encode_pseudo_gradient(u, how, unit));
        auto cut = cut_encoded(whole, as_sliced(p).slice_of(u));
        ASSERT_TRUE(cut);
        EXPECT_EQ(unit.payload, cut->payload) << "step " << step << " unit " << u;
        EXPECT_EQ(unit.scales, cut->scales) << "step " << step << " unit " << u;
      }
    }
  }
}

TEST(SlicedReplica, MergingEveryUnitOfAFragmentIsMergingTheWholeFragment) {
  const std::vector<std::size_t> sizes = {4 * granule};
  auto p = two_replicas(sizes, 4);
  ASSERT_TRUE(p.sliced);
  adopt_on_both(p, globals_of(sizes, 1));
  p.whole->train_step(1);
  p.sliced->train_step(1);
  const auto next = globals_of(sizes, 9);
  p.whole->merge_global(0, next[0].data(), 0.5f);
  for (std::size_t u = 0; u < 4; ++u) p.sliced->merge_global(u, next[0].data() + as_sliced(p).slice_of(u).first, 0.5f);
  EXPECT_EQ(p.sliced->evaluate_global(), p.whole->evaluate_global()) << "the same theta_global";
  p.whole->train_step(2);
  p.sliced->train_step(2);  // the merges reach the model before the step
  EXPECT_EQ(p.inner->params(), p.plain->params());
  // The next round's results go through the same buffer: nothing of the last round's stays.
  const auto after = globals_of(sizes, 21);
  p.whole->merge_global(0, after[0].data(), 0.25f);
  for (std::size_t u = 0; u < 4; ++u)
    p.sliced->merge_global(u, after[0].data() + as_sliced(p).slice_of(u).first, 0.25f);
  p.whole->train_step(3);
  p.sliced->train_step(3);
  EXPECT_EQ(p.inner->params(), p.plain->params());
}

TEST(SlicedReplica, AUnitThatMergesAloneLeavesTheRestOfItsFragmentAsItWas) {
  const std::vector<std::size_t> sizes = {2 * granule};
  auto p = two_replicas(sizes, 2);
  ASSERT_TRUE(p.sliced);
  adopt_on_both(p, globals_of(sizes, 1));
  p.sliced->train_step(1);
  const auto before = p.inner->params();
  const auto next = testing::random_values(granule, 9);
  p.sliced->merge_global(1, next.data(), 0.25f);
  p.sliced->evaluate();
  const auto& after = p.inner->params();
  EXPECT_EQ(std::memcmp(after.data(), before.data(), granule * sizeof(float)), 0) << "unit 0 untouched";
  for (std::size_t i = 0; i < granule; ++i)
    ASSERT_EQ(after[granule + i], 0.25f * before[granule + i] + 0.75f * next[i]) << i;
}

TEST(SlicedReplica, AUnitThatAdoptsAStateChangesItsOwnRangeAndTheOthersKeepTraining) {
  const std::vector<std::size_t> sizes = {2 * granule};
  auto p = two_replicas(sizes, 2);
  ASSERT_TRUE(p.sliced);
  const auto global = globals_of(sizes, 1);
  adopt_on_both(p, global);
  p.sliced->train_step(1);
  const auto trained = p.inner->params();
  const auto state = testing::random_values(granule, 11);
  p.sliced->adopt_global(0, state.data());  // a resync of unit 0 alone
  EXPECT_EQ(std::memcmp(p.inner->params().data(), state.data(), granule * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(p.inner->params().data() + granule, trained.data() + granule, granule * sizeof(float)), 0);
  // Unit 0 holds its theta_global: nothing to contribute. Unit 1 contributes what it trained.
  const replica::encoding how{codec_kind::fp32, 0, false};
  encoded_values unit0, unit1;
  ASSERT_FALSE(p.sliced->encode_pseudo_gradient(0, how, unit0));
  ASSERT_FALSE(p.sliced->encode_pseudo_gradient(1, how, unit1));
  std::vector<float> delta0(granule), delta1(granule);
  ASSERT_FALSE(decode(unit0, delta0.data()));
  ASSERT_FALSE(decode(unit1, delta1.data()));
  EXPECT_EQ(delta0, std::vector<float>(granule, 0.0f));
  for (std::size_t i = 0; i < granule; ++i) ASSERT_EQ(delta1[i], global[0][granule + i] - trained[granule + i]) << i;
}

}  // namespace
}  // namespace atl
