#pragma once
// When the registry sends what changed (PeerTables to the nodes, Memberships to the
// coordinators): changes closer together than `gap` to the last sending wait and go out as
// one (pure; the registry keeps one of these for each and runs its verdict).
//
//   a change, gap passed since the last sending --> send_now (the caller sends, then sent())
//   a change within the gap, none due          --> schedule: a sending in `wait`, now due
//   a change within the gap, one due            --> already_due: that sending takes it
#include <chrono>

namespace atl {

class coalesced_send {
 public:
  using clock = std::chrono::steady_clock;
  enum class verdict { send_now, schedule, already_due };

  verdict on_change(clock::time_point now, std::chrono::milliseconds gap) {
    const auto since = now - sent_at_;
    if (since >= gap) return verdict::send_now;
    if (due_) return verdict::already_due;
    due_ = true;
    wait_ = std::chrono::duration_cast<std::chrono::milliseconds>(gap - since);
    return verdict::schedule;
  }
  // After a schedule verdict: how long until the sending.
  std::chrono::milliseconds wait() const { return wait_; }
  bool due() const { return due_; }
  // The caller sent what changed (at once, or when its scheduled sending came).
  void sent(clock::time_point now) {
    sent_at_ = now;
    due_ = false;
  }

 private:
  clock::time_point sent_at_{};
  bool due_ = false;
  std::chrono::milliseconds wait_{0};
};

}  // namespace atl
