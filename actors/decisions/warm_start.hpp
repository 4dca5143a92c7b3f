#pragma once
// A joiner's inner-optimizer state (AdamW's moments and step count), fetched from a live
// peer, a donor, in chunks and checked against the digest the donor's first reply gives;
// fresh state when no donor can give it. Pure logic: the worker sends the requests it
// names and tells it the replies and the timeouts.
//
//   idle --begin(donors)--> asking donor 1 (snapshot 0: "take a snapshot")
//   asking --reply: found, the size we hold--> fetching that snapshot (actors/decisions/state_fetch)
//   fetching --more--> fetching --every value, digest matches--> warm
//   asking | fetching --found=false, wrong size, digest mismatch, timeout--> asking the
//                                                                      next donor
//   no donor left --> cold (fresh state)
//
// A donor's state moves on while it trains, so a transfer that breaks restarts from a new
// snapshot of the next donor rather than resuming at another donor's bytes.
#include <cstdint>
#include <string>
#include <vector>

#include "actors/decisions/state_fetch.hpp"

namespace atl {

class warm_start {
 public:
  struct request {
    std::string donor;
    std::uint64_t snapshot = 0;  // 0: take a new one
    std::uint64_t offset = 0;
    std::uint64_t count = 0;
  };
  struct reply {
    std::string sender;
    std::uint64_t snapshot = 0;
    bool found = false;
    std::int64_t adam_step = 0;
    std::uint64_t count = 0;  // values in the snapshot
    std::uint64_t digest = 0;
    std::uint64_t offset = 0;
  };
  enum class outcome {
    ignored,  // not the reply awaited
    more,  // send next_request()
    warm,  // every value is here and matches: take_values(), adam_step()
    cold,  // no donor could give it: start with fresh state
  };

  // `size`: the values this worker's replica holds (a donor's must match); `chunk`: values
  // per request.
  warm_start(std::uint64_t size, std::uint64_t chunk) : size_(size), chunk_(chunk == 0 ? 1 : chunk) {}

  // Starts asking `donors` in order (duplicates and `self` left out). more, or cold when
  // there is nobody to ask.
  outcome begin(const std::vector<std::string>& donors, const std::string& self);
  bool active() const { return active_; }
  request next_request() const;
  outcome on_reply(const reply& r, const std::vector<float>& values);
  outcome on_timeout();  // the donor asked did not answer in time
  const std::string& donor() const { return donors_[donor_]; }
  // Why the last donor failed (for the log line); empty while none has.
  const std::string& last_failure() const { return last_failure_; }

  std::vector<float> take_values() { return fetch_.take_values(); }
  std::int64_t adam_step() const { return adam_step_; }
  std::uint64_t digest() const { return digest_; }

 private:
  outcome next_donor(std::string why);

  std::uint64_t size_, chunk_;
  bool active_ = false;
  std::vector<std::string> donors_;
  std::size_t donor_ = 0;
  std::uint64_t snapshot_ = 0;  // 0 while asking
  std::int64_t adam_step_ = 0;
  std::uint64_t digest_ = 0;
  state_fetch fetch_;
  std::string last_failure_;
};

}  // namespace atl
