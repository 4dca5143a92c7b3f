#pragma once
// Polls a condition until it holds or a deadline passes (for asynchronous effects).
#include <chrono>
#include <thread>

namespace atl::testing {

template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = std::chrono::seconds(5),
                std::chrono::milliseconds step = std::chrono::milliseconds(20)) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(step);
  }
  return true;
}

}  // namespace atl::testing
