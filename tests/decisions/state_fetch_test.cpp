#include "actors/decisions/state_fetch.hpp"

#include <gtest/gtest.h>

#include "runtime/core/digest.hpp"

namespace atl {
namespace {

std::vector<float> ramp(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.5f * static_cast<float>(i) - 3.0f;
  return v;
}

std::vector<float> slice(const std::vector<float>& v, std::uint64_t offset, std::uint64_t count) {
  return {v.begin() + static_cast<std::ptrdiff_t>(offset), v.begin() + static_cast<std::ptrdiff_t>(offset + count)};
}

TEST(StateFetch, ChunksArriveInOrderAndTheDigestIsChecked) {
  const auto theta = ramp(10);
  state_fetch fetch(7, theta.size(), digest64(theta.data(), theta.size() * 4), {"keeper/0", "keeper/1"}, 4);
  std::vector<std::uint64_t> offsets;
  for (;;) {
    const auto req = fetch.next_request();
    EXPECT_EQ(req.keeper, "keeper/0");
    offsets.push_back(req.offset);
    const auto out = fetch.on_reply("keeper/0", 7, req.offset, true, slice(theta, req.offset, req.count));
    if (out == state_fetch::outcome::done) break;
    ASSERT_EQ(out, state_fetch::outcome::more);
  }
  EXPECT_EQ(offsets, (std::vector<std::uint64_t>{0, 4, 8}));
  EXPECT_FALSE(fetch.active());
  EXPECT_EQ(fetch.take_values(), theta);
}

// The first keeper dies after one chunk: the second is asked from value 4 on.
TEST(StateFetch, ASourceThatFailsIsReplacedAndTheTransferResumes) {
  const auto theta = ramp(10);
  state_fetch fetch(7, theta.size(), digest64(theta.data(), theta.size() * 4), {"keeper/0", "keeper/1"}, 4);
  ASSERT_EQ(fetch.on_reply("keeper/0", 7, 0, true, slice(theta, 0, 4)), state_fetch::outcome::more);
  ASSERT_TRUE(fetch.next_source());  // keeper/0 went silent
  auto req = fetch.next_request();
  EXPECT_EQ(req.keeper, "keeper/1");
  EXPECT_EQ(req.offset, 4u);
  // A late reply of the old source, a duplicate and a wrong round change nothing.
  EXPECT_EQ(fetch.on_reply("keeper/0", 7, 4, true, slice(theta, 4, 4)), state_fetch::outcome::ignored);
  EXPECT_EQ(fetch.on_reply("keeper/1", 7, 0, true, slice(theta, 0, 4)), state_fetch::outcome::ignored);
  EXPECT_EQ(fetch.on_reply("keeper/1", 6, 4, true, slice(theta, 4, 4)), state_fetch::outcome::ignored);
  ASSERT_EQ(fetch.on_reply("keeper/1", 7, 4, true, slice(theta, 4, 4)), state_fetch::outcome::more);
  ASSERT_EQ(fetch.on_reply("keeper/1", 7, 8, true, slice(theta, 8, 2)), state_fetch::outcome::done);
  EXPECT_EQ(fetch.take_values(), theta);
}

TEST(StateFetch, WrongBytesStartOverAndEndlessFailuresGiveUp) {
  const auto theta = ramp(6);
  state_fetch fetch(1, theta.size(), digest64(theta.data(), theta.size() * 4), {"keeper/0", "keeper/1"}, 3);
  auto bad = slice(theta, 3, 3);
  bad[1] += 1.0f;
  ASSERT_EQ(fetch.on_reply("keeper/0", 1, 0, true, slice(theta, 0, 3)), state_fetch::outcome::more);
  EXPECT_EQ(fetch.on_reply("keeper/0", 1, 3, true, bad), state_fetch::outcome::failed);
  ASSERT_TRUE(fetch.next_source());
  EXPECT_EQ(fetch.next_request().offset, 0u);  // from the start, from keeper/1
  EXPECT_EQ(fetch.next_request().keeper, "keeper/1");
  EXPECT_EQ(fetch.on_reply("keeper/1", 1, 0, false, {}), state_fetch::outcome::failed);  // does not hold it
  EXPECT_EQ(fetch.on_reply("keeper/1", 1, 0, true, slice(theta, 0, 3)), state_fetch::outcome::more);
  int tries = 0;
  while (fetch.next_source()) ++tries;
  EXPECT_EQ(tries, 6);  // 3 x 2 sources without progress
  EXPECT_FALSE(fetch.active());
}

}  // namespace
}  // namespace atl
