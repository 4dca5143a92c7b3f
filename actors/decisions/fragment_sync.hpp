#pragma once
// One fragment's outer sync as a worker sees it, apart from all I/O: the worker actor
// (actors/worker/worker.cpp) sends what a transition calls for and feeds back what arrives.
//
//   (any) --ask: StateRequest sent--> [asking] --state inline--> adopt --> (synced r)
//   [asking] --state as a header--> [fetching] --last chunk, digest ok--> adopt --> (synced r)
//   [fetching] --every keeper failed--> ask --> [asking]
//   [asking] --StateHeld(seedHeld)--> itself (held by the coordinator; seedHeld: rank 0's
//            repeats need not carry its parameters, nor does any request after a state)
//   (synced r) --skip(q > r): the worker is past round q's sync point--> ask -->
//            [asking], every request naming q as skipped until a state is adopted
//            (a round named within again_after: skip(q) changes nothing)
//   (synced r) --contributed(round q)--> [awaiting_result q] --result of q--> [result_ready q]
//   [awaiting_result q] --low-bit result of q: kept theta_global + change, digest ok--> [result_ready q]
//   [result_ready q] --take_result: merged (DiLoCo) or applied (ddp)--> (synced q)
//   [awaiting_result q] --provisional result of q (early results)--> itself, the result held
//   [awaiting_result q] --confirmation of q, held result with its digest--> [result_ready q]
//   [awaiting_result q] --confirmation of q, nothing held--> not_ready (the caller asks)
//   (a held result is dropped by ask, a fetch, adopt, take_result, the next contribution,
//   and a state of q's base round: its coordinator was re-placed and does q again)
//
//   [awaiting_result] --Refusal(duplicate)--> itself (the contribution counted)
//   [awaiting_result] --Refusal(stale_epoch) from a newer epoch--> itself, sent again in it
//   [awaiting_result] --any other Refusal--> ask --> [asking], the contribution kept
//   [asking] with a kept contribution --state of its base round--> [awaiting_result], sent again
//   [awaiting_result] --unasked state of its base round (a re-placed coordinator)--> sent again
//   [awaiting_result] --unasked state at or past its round--> adopt (resync)
//   [awaiting_result] past diloco.result_timeout_ms, or the link came back --> sent again
//
// The pending contribution's bytes never change once taken (the error-feedback residual
// was updated then): every sending is the same contribution, stamped with the epoch of
// the round it is for. Illegal transitions return a typed error and change nothing.
//
// The fragment's theta_global (the last adopted or taken) is kept: a low-bit result is
// the round's encoded change to it (actors/decisions/round_tracker.hpp), and adding the same
// decoded change to the same bits gives every participant the coordinator's bits.
#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

#include "actors/decisions/state_fetch.hpp"
#include "runtime/algorithm/codec.hpp"
#include "runtime/core/error.hpp"

namespace atl {

class fragment_sync {
 public:
  using time_point = std::chrono::steady_clock::time_point;
  using duration = std::chrono::steady_clock::duration;
  enum class phase { asking, fetching, synced, awaiting_result, result_ready };

  // A StateRequest went out: from any phase (a kept contribution stays kept).
  void ask();
  // The worker is past the sync point of `round` holding an older one (a joiner whose
  // other slice of the fragment is a round ahead; a state older than its step) and will
  // contribute to none up to it: the StateRequests until a state is adopted name it
  // (StateRequest.skipsRound), so that the coordinator leaves this worker out of such a
  // round instead of waiting for it, and answers with that round's state or a newer one.
  // Then ask(). false, changing nothing, for a round named less than `again_after` ago:
  // the coordinator may have answered with an older state all the same (that round had no
  // other participant, or its state was on its way), and is asked again only that often.
  bool skip(std::uint64_t round, time_point now, duration again_after);
  std::uint64_t skips_round() const { return skips_round_; }  // 0: none
  // StateHeld: the coordinator holds our request; `seed_held`: it can seed the fragment
  // without our parameters (seeded, or holding them from an earlier request).
  void held(bool seed_held) { seed_wanted_ = !seed_held; }
  // Whether rank 0's StateRequest carries its parameters: only once the coordinator said
  // it holds no seed, and before any state was adopted (then the run is seeded). The first
  // request goes without: by the time the StateHeld comes back, the route to the
  // coordinator is known, and the parameters go node to node instead of through the head.
  bool parameters_wanted() const { return never_adopted() && seed_wanted_; }
  // No state adopted yet: the local fragment still holds the replica's initial values
  // (which, in a fresh run, every worker shares: one seed).
  bool never_adopted() const { return theta_global_.empty(); }
  // A FragmentState header: the values come in chunks (`fetch` names the keepers).
  void start_fetch(state_fetch fetch, std::uint64_t epoch);
  // The committed state of `round`, theta_global, replaced the local fragment: synced at
  // `round`, theta_global kept.
  void adopt(std::uint64_t round, std::uint64_t epoch, std::vector<float> theta_global);
  // synced -> awaiting_result: the contribution for `round`, merged before step `merge_at`.
  status contribute(std::uint64_t round, std::int64_t merge_at, encoded_values bytes);
  // A sending of the pending contribution (envelope seq), at `now`.
  void sent(std::uint64_t seq, time_point now);
  // awaiting_result -> result_ready if it is the awaited round's result; false otherwise.
  bool result_arrived(std::uint64_t round, std::uint64_t epoch, std::vector<float> values);
  // The same for a low-bit result: the result is the kept theta_global plus `change`.
  // Typed errors, changing nothing: not_ready (no theta_global kept), tensor_mismatch
  // (size), not_finite (the sum), digest_mismatch (not the coordinator's bits).
  // `change` is encoded as it came (check_encoded passed): it is decoded block by block as
  // it is added, and the sum's digest taken in the same pass.
  expected<bool> update_arrived(std::uint64_t round, std::uint64_t epoch, const encoded_values& change,
                                std::uint64_t digest);
  // Early results: the awaited round's result, sent while that round commits, is held and
  // not applied (false: not the awaited round). A later one of the same round replaces it
  // (a re-placed coordinator redoing the round). The update form checks as update_arrived.
  bool provisional_arrived(std::uint64_t round, std::vector<float> values, std::uint64_t digest);
  expected<bool> provisional_update_arrived(std::uint64_t round, const encoded_values& change, std::uint64_t digest);
  // The round committed: the held result of `round` becomes the result (awaiting_result ->
  // result_ready). false: not the awaited round (a duplicate or stale confirmation);
  // not_ready: no result of that round and digest is held (lost, or refused).
  expected<bool> confirmed(std::uint64_t round, std::uint64_t epoch, std::uint64_t digest);
  // result_ready -> synced at the result's round, which becomes the kept theta_global;
  // returns the result's values (the kept theta_global, valid until the next result).
  expected<const std::vector<float>*> take_result();
  // A fragment-sized buffer of an earlier round (or an empty one) to fill with the next
  // result. Reused rather than allocated: a fresh 64 MiB vector costs 16384 page faults,
  // which took 0.3 s of system time (1 s of wall time on 2 busy cores) on the VMs this
  // was measured on, and the heap kept growing for rounds with one allocated a round.
  std::vector<float> recycled_buffer();

  // A FragmentState of `round` arrived in `epoch`, asked for or not.
  enum class on_state {
    ignore,  // a duplicate, or nothing to recover
    send_again,  // a re-placed coordinator reopened our round: the same contribution
    send_again_and_resume,  // asked after a refusal and our round is open: the same contribution
    adopt,  // take it (inline, or start fetching)
    resync,  // unasked, but it is past our round: take it
  };
  on_state state_arrived(std::uint64_t round, std::uint64_t epoch);

  // A Refusal of the message sent as `refused_seq`, carrying `refusal_epoch`.
  enum class on_refusal { ignore, send_again, ask_state };
  on_refusal refused(errc code, std::uint64_t refused_seq, std::uint64_t refusal_epoch);

  // What to repeat: on the worker's tick (a silent keeper, an unanswered StateRequest, an
  // overdue result), or once the link to the head came back (what we sent may be lost).
  enum class retry { none, next_keeper, next_chunk, ask_state, send_again };
  retry on_tick(time_point now, duration keeper_timeout, duration result_timeout) const;
  retry on_link_restored() const;

  phase current() const { return phase_; }
  bool state_on_its_way() const { return phase_ == phase::asking || phase_ == phase::fetching; }
  bool waiting_for_result() const { return phase_ == phase::awaiting_result; }
  bool has_result() const { return phase_ == phase::result_ready; }
  std::uint64_t round() const { return round_; }  // last merged or adopted
  std::uint64_t epoch() const { return epoch_; }  // of the coordinator's open round, as last heard
  std::int64_t merge_at() const { return merge_at_; }
  const encoded_values& pending() const { return pending_; }
  std::uint64_t pending_round() const { return pending_round_; }
  std::uint64_t pending_seq() const { return pending_seq_; }
  const std::vector<float>& result() const { return result_; }  // while result_ready
  // The result's digest when it was checked against the coordinator's on arrival (an update,
  // or a confirmed early result): the worker's RoundAck need not hash it again.
  std::optional<std::uint64_t> result_digest() const { return result_digest_; }
  state_fetch& fetch() { return fetch_; }
  std::uint64_t fetch_epoch() const { return fetch_epoch_; }
  void chunk_asked(time_point now) { chunk_asked_at_ = now; }

 private:
  status expect(phase wanted, const char* op) const;
  // The kept theta_global plus a round's change, checked (update_arrived's errors).
  expected<std::vector<float>> applied(std::uint64_t round, const encoded_values& change, std::uint64_t digest);
  // awaiting_result -> result_ready with `values`; checked_digest: theirs, when checked.
  bool arrived(std::uint64_t round, std::uint64_t epoch, std::vector<float> values,
               std::optional<std::uint64_t> checked_digest);
  void drop_provisional();
  // Keeps the larger of `buffer` and the spare for recycled_buffer().
  void recycle(std::vector<float> buffer);

  phase phase_ = phase::asking;
  std::uint64_t round_ = 0;
  std::uint64_t skips_round_ = 0;  // named in each StateRequest until a state is adopted
  std::uint64_t skipped_ = 0;  // the last round named so, and when
  time_point skipped_at_{};
  std::uint64_t epoch_ = 0;
  // The awaited contribution, kept until its result arrives.
  encoded_values pending_;
  std::uint64_t pending_round_ = 0;
  std::uint64_t pending_seq_ = 0;
  std::int64_t merge_at_ = 0;
  time_point sent_at_{};
  std::vector<float> result_;
  std::uint64_t result_round_ = 0;
  std::optional<std::uint64_t> result_digest_;
  // A provisional result (early results), held until its round's confirmation.
  std::vector<float> provisional_;
  std::uint64_t provisional_round_ = 0;
  std::uint64_t provisional_digest_ = 0;
  bool has_provisional_ = false;
  bool provisional_checked_ = false;  // an update, checked against its digest on arrival
  std::vector<float> theta_global_;  // empty until a state is adopted
  std::vector<float> spare_;  // a replaced theta_global or dropped result, for the next result
  bool seed_wanted_ = false;  // the last StateHeld said the coordinator holds no seed
  state_fetch fetch_;
  std::uint64_t fetch_epoch_ = 0;
  time_point chunk_asked_at_{};
};

const char* to_string(fragment_sync::phase p);

}  // namespace atl
