#pragma once
// A fragment's committed state fetched in chunks from the keepers, resumable: when the
// keeper asked does not answer in time, does not hold the round, or the values do not
// match the digest, the next keeper is asked, from the first value still missing (from the
// start after a digest mismatch). Pure logic: the worker sends the requests it names.
//
//   fetching --reply with the next values--> fetching (next chunk) | done (digest checked)
//   fetching --timeout, found=false, or digest mismatch--> next source (resume)
//   fetching --every source failed `sources x 3` times in a row--> gave up
#include <cstdint>
#include <string>
#include <vector>

namespace atl {

class state_fetch {
 public:
  struct request {
    std::string keeper;
    std::uint64_t offset = 0;
    std::uint64_t count = 0;
  };
  enum class outcome {
    ignored,  // not the reply awaited (a duplicate, late, or from another source)
    more,  // take the next request
    done,  // every value is here and matches the digest: take_values()
    failed,  // the source cannot serve it (found=false, wrong size, digest mismatch): next_source()
  };

  state_fetch() = default;
  state_fetch(std::uint64_t round, std::uint64_t count, std::uint64_t digest, std::vector<std::string> sources,
              std::uint64_t chunk);

  bool active() const { return active_; }
  std::uint64_t round() const { return round_; }
  std::uint64_t received() const { return next_; }
  const std::string& source() const { return sources_[source_]; }

  request next_request() const;
  outcome on_reply(const std::string& sender, std::uint64_t round, std::uint64_t offset, bool found,
                   const std::vector<float>& values);
  // Moves to the next source, resuming where the values stop. False once every source has
  // failed three times in a row: the caller asks the coordinator again.
  bool next_source();
  std::vector<float> take_values();  // after done
  void cancel() { active_ = false; }

 private:
  bool active_ = false;
  std::uint64_t round_ = 0, digest_ = 0, chunk_ = 1;
  std::vector<std::string> sources_;
  std::size_t source_ = 0;
  int failures_ = 0;  // in a row, without progress
  std::vector<float> values_;
  std::uint64_t next_ = 0;  // first value not yet received
};

}  // namespace atl
