#pragma once
// The state of one fragment's outer rounds at its coordinator, apart from all I/O.
//
//   (unseeded) --seed(theta)--> [committing r=0] --committed--> (ready r)
//   (ready r) --open(epoch, participants)--> (collecting r+1)
//   (collecting r+1) --add(...) by every participant--> [committing r+1] --committed--> (ready r+1)
//   (collecting r+1) --drop(worker) leaving >= 1 contribution from all remaining--> [committing r+1]
//   (collecting r+1) --close_at_deadline(n) with >= n contributions--> [committing r+1]
//   (collecting r+1) --add_late(w) for round r, which closed without w--> itself, the late
//                    input held for round r+1 (it does not stand for w's own contribution)
//
// Late work (diloco.late_work = keep): a participant left out of round r (closed at its
// deadline or grace) that sends round r while r+1 collects has its pseudo-gradient folded
// into r+1 as an extra input, named late_name(w), weighted late_discount times its weight:
// it was taken against theta_{r-1}, one round stale (HeLoCo corrects such staleness; we
// discount it). The round log records it like any input, so keepers replay it bit for bit.
// Only a tracker that committed round r itself knows who was left out of it; one restored
// from a keeper refuses late work for its first round (wrong_round: the sender resyncs).
//
// Every transition checks the phase it is allowed from and returns a typed error
// otherwise. Contributions are fenced: wrong epoch -> stale_epoch, other round ->
// wrong_round, second from a worker -> duplicate, non-participant -> not_participant,
// wrong size -> tensor_mismatch, NaN/inf values or a weight that is not positive and
// finite -> not_finite (the round is not poisoned). A contributor's resend while its round
// commits -> duplicate (its result is coming).
//
// Low-bit results (encode_results): a completed round's change of theta, plus the
// error-feedback residual of earlier rounds, is encoded, and theta becomes the previous
// theta plus the decoded change. A participant that adds the same decoded bytes to its
// copy of the previous theta reaches the same bits; the residual keeps theta within one
// quantization step of the exact outer trajectory. The momentum stays exact, or follows
// the published change (state_follows_result, diloco.round_record = result). The step is
// runtime/algorithm/outer_round.hpp's, which keepers run again on the logged record.
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "runtime/algorithm/codec.hpp"
#include "runtime/algorithm/outer_optimizer.hpp"
#include "runtime/algorithm/outer_round.hpp"

namespace atl {

class round_tracker {
 public:
  enum class phase { unseeded, ready, collecting, committing };
  // nesterov: DiLoCo's outer step on theta. average_only: the round's result is the
  // average itself and theta stays (synchronous data-parallel: averaged gradients).
  enum class update_rule { nesterov, average_only };

  round_tracker(std::uint32_t fragment, outer_options opt, update_rule rule = update_rule::nesterov)
      : fragment_(fragment), rule_(rule) {
    outer_.outer = opt;
  }

  // A committed state loaded from a keeper (restart). `residual` (empty: zeros) is the
  // low-bit results' error feedback, which the keepers replay with the same step.
  status restore(std::uint64_t round, std::vector<float> theta, std::vector<float> momentum,
                 std::vector<float> residual = {});
  status seed(std::vector<float> theta);  // unseeded -> committing round 0
  status open(std::uint64_t epoch, std::vector<std::string> participants);  // ready -> collecting
  // Returns true when the round became complete (and moved to committing).
  expected<bool> add(const std::string& worker, std::uint64_t epoch, std::uint64_t round, std::vector<float> delta,
                     float weight);
  // The same for a contribution as it came (check_encoded's errors too). An int8 or fp4 one
  // stays encoded until the outer step decodes it block by block (its values are finite
  // when its scales are, which check_encoded checks); any other is decoded and added.
  expected<bool> add_encoded(const std::string& worker, std::uint64_t epoch, std::uint64_t round, encoded_values delta,
                             float weight);
  // Late work for the last committed round from a participant of the open round that was
  // left out of it (see above). Typed errors: wrong_round (another round, it contributed to
  // the last round, or who did is unknown), not_participant, duplicate (a late input of it
  // is held), stale_epoch (from after the round's epoch), and add's checks of the values.
  expected<bool> add_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round, std::vector<float> delta,
                          float weight);
  expected<bool> add_late_encoded(const std::string& worker, std::uint64_t epoch, std::uint64_t round,
                                  encoded_values delta, float weight);
  static constexpr float late_discount = 0.5f;
  static std::string late_name(const std::string& worker);  // worker + "#late"
  static bool is_late_name(const std::string& name);
  static std::string worker_of_late_name(const std::string& name);  // precondition: is_late_name
  // A participant is gone: the round completes with the rest if they all contributed.
  expected<bool> drop(const std::string& worker);
  // The round's deadline passed: it completes with the contributions it has if there are
  // at least `needed` (the participants that did not contribute are dropped from it);
  // otherwise nothing changes and false is returned.
  expected<bool> close_at_deadline(std::size_t needed);
  status committed();  // committing -> ready
  // Results as encoded changes of theta (nesterov rounds only); fp32, the default,
  // releases theta itself. `state_follows_result`: the momentum follows the published
  // change (outer_round.hpp), so that the change alone replays the round.
  void encode_results(codec_kind kind, std::size_t chunk, bool state_follows_result = false);

  phase current_phase() const { return phase_; }
  std::uint64_t committed_round() const { return round_; }
  std::uint64_t open_round() const { return round_ + 1; }
  std::uint64_t open_epoch() const { return epoch_; }
  const std::vector<float>& theta() const { return state_.theta; }
  // What a completed round releases: theta (nesterov) or the average (average_only).
  const std::vector<float>& result() const { return rule_ == update_rule::nesterov ? state_.theta : average_; }
  // The last completed round's averaged pseudo-gradient (nesterov rounds): what a round
  // log record carries instead of the contributions when it is the smaller of the two.
  const std::vector<float>& last_average() const { return scratch_.average; }
  // How rounds turn their average into theta (the outer optimizer and the result codec).
  const outer_rule& rule_of_rounds() const { return outer_; }
  update_rule rule() const { return rule_; }
  // The last completed round's encoded change of theta, or null: release theta itself
  // (fp32 results, or an encoding that failed, which then changed nothing).
  const encoded_values* released_update() const { return update_ ? &*update_ : nullptr; }
  const std::vector<float>& momentum() const { return state_.momentum; }
  const std::vector<float>& residual() const { return state_.residual; }
  const std::set<std::string>& participants() const { return participants_; }
  std::vector<std::string> contributors() const;  // the participants that contributed
  std::size_t contributor_count() const { return on_time_contributions(); }  // without building the list
  // Every input of the round in the order it is averaged in (worker id; a late input right
  // after its worker), with its weight as averaged: what the round log records.
  std::vector<std::pair<std::string, float>> inputs() const;
  // Whether `worker` contributed to the open (or committing) round: asked for each message,
  // without copying the list.
  bool has_contributed(const std::string& worker) const { return contributions_.count(worker) > 0; }
  // A buffer of an earlier round's contribution (or an empty one) to decode the next
  // contribution into: contributions are fragment-sized, and kept like scratch_ below.
  std::vector<float> contribution_buffer();
  // The same for an encoded contribution: its payload's memory from an earlier round.
  encoded_values encoded_buffer();

 private:
  // The fences of add: phase, epoch, round, participant, duplicate.
  status admissible(const std::string& worker, std::uint64_t epoch, std::uint64_t round) const;
  status admissible_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round) const;
  // The checks and the store of add and add_encoded, under `name` (a worker, or its late name).
  expected<bool> take_values(const std::string& name, std::vector<float> delta, float weight);
  expected<bool> take_encoded(const std::string& name, encoded_values delta, float weight);
  // add_late's fences and count around `take(late name, discounted weight)`.
  template <typename Take>
  expected<bool> take_late(const std::string& worker, std::uint64_t epoch, std::uint64_t round, Take take,
                           float weight);
  std::size_t on_time_contributions() const { return contributions_.size() - late_inputs_; }
  expected<bool> finish_if_complete();
  void recycle_contributions();  // contributions_ emptied, their buffers kept

  std::uint32_t fragment_;
  outer_rule outer_;
  update_rule rule_;
  std::vector<float> average_;  // last completed round's average (average_only)
  phase phase_ = phase::unseeded;
  std::uint64_t round_ = 0;  // last committed (or committing, in phase committing) round
  std::uint64_t epoch_ = 0;  // epoch of the open round
  outer_state state_;  // theta, momentum and the result codec's residual
  std::set<std::string> participants_;
  struct contribution {
    std::vector<float> values;  // decoded
    encoded_values encoded;  // or as it came (int8, fp4)
    bool is_encoded = false;
    float weight = 0;
  };
  std::map<std::string, contribution> contributions_;  // sorted by worker id, late inputs too
  std::size_t late_inputs_ = 0;  // of contributions_
  // Who contributed to the last round this tracker committed; unknown after restore.
  std::optional<std::set<std::string>> last_contributors_;
  std::optional<encoded_values> update_;
  // Fragment-sized working memory of a round, kept from one round to the next: allocated
  // afresh, every round faulted in and zeroed four fragments of pages, which at 256 MiB
  // took most of an int8 round's averaging (the heap's free top is given back between).
  outer_scratch scratch_;
  std::vector<std::vector<float>> spare_contributions_;
  std::vector<std::vector<std::uint8_t>> spare_encoded_;
};

const char* to_string(round_tracker::phase p);

}  // namespace atl
