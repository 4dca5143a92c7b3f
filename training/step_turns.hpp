#pragma once
// The hand-over between a user's training loop (the Python API's diloco.step()) and the
// worker actor that syncs its parameters. They take turns at every step boundary, so the
// runtime reads and writes the user's tensors only while the user's thread waits:
//
//   user thread                          worker thread
//   -----------                          -------------
//   forward, backward                    waits in train_step()  (wait_for_user_step)
//   step():  wait_for_worker()  -> go
//            the optimizer's step
//            hand_over(loss)        ---> returns from train_step(): contributes, merges
//            wait_for_worker()           results, blocks for a late one ...
//              go  <--------------------  ... and waits in the next train_step()
//              done <-------------------  or finished its steps (finish_queued_step)
//   next forward                         waits in train_step()
//
// A worker that dies and is restarted waits again with the same object; the user's thread
// just waits for it. Thread-safe; no LibTorch.
//
// With the run's data cursor (atoll.ElasticSampler), the worker also offers each step's
// units before it waits for that step, and the user takes them before its forward:
//
//   worker: offer_units(step s's) -> wait_for_user_step()     user: take_units() -> batch s
//   a take_units() while the worker waits for a step and none is offered: the user asks
//   for batch s + 1 before it stepped batch s (asked_ahead; a prefetching DataLoader),
//   which would wait for ever.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <vector>

namespace atl {

class step_turns {
 public:
  struct user_step {
    float loss = 0.0f;
    std::int64_t samples = 0;
    std::optional<float> held_out;  // a held-out loss the user measured before this step
  };
  enum class turn { go, done };

  // Worker side. Waits for the user's next step and returns it; nullopt once closed.
  std::optional<user_step> wait_for_user_step();
  // The worker finished its steps (or the node stopped): the user's waits return done.
  void finish();

  // Worker side: the units of the step it is about to wait for.
  void offer_units(std::vector<std::uint64_t> units);

  // User side. The next step's units: ready (in `out`), done (the worker finished), or
  // asked_ahead (none can come before the user steps the batch it has).
  enum class units_turn { ready, done, asked_ahead };
  units_turn take_units(std::vector<std::uint64_t>& out);
  // User side. Waits until the worker waits for a step (go) or has finished (done).
  turn wait_for_worker();
  // The user took a step: the worker's wait returns it.
  void hand_over(user_step step);
  // The user stops: a worker waiting for a step gets nullopt, now and later.
  void close();

  bool finished() const;
  std::int64_t steps_handed_over() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::int64_t asked_ = 0;  // times the worker waited for a step
  std::int64_t given_ = 0;  // steps the user handed over
  user_step last_;
  bool finished_ = false;
  bool closed_ = false;
  std::deque<std::vector<std::uint64_t>> units_;  // offered, not taken
};

}  // namespace atl
