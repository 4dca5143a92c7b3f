#pragma once
// The Membership as what changed (pure): the registry sends each coordinator the workers
// added and removed since the Membership it published last, and a version check only to a
// coordinator that names another one, instead of every worker (about 16 bytes each: 16 KB
// at a thousand nodes) to every coordinator every tick and on every change (issue 45). The
// PeerTable's deltas (runtime/transport/route_delta.hpp) work the same way.
//
//   registry: M(e0) published ... changes ... M(e1):
//               each placed coordinator <- delta(base e0): workers added, workers removed,
//                                          quorum and keepers (always whole: a few words),
//                                          digest of M(e1)
//               a RoundProgress naming   <- delta(base e1, nothing changed): the version
//                 another Membership        check (each coordinator names the one it holds
//                                           at least every 2 s; one that holds e1 hears
//                                           nothing while nothing changes)
//               a MembershipRequest      <- the whole Membership
//
//   coordinator: holds M(b) --delta of base b--> applied; its digest is the sender's --> M(e1)
//                                                   \--digests differ--> needs the whole
//                holds M(e1) already (a whole Membership answered its request first) --> nothing
//                holds M(b) --delta of another base, not older than b--> needs the whole
//                holds M(b) --anything of an epoch before b--> nothing (late)
//                any        --the whole Membership of epoch >= b--> replaces its own (a
//                              whole one from before deltas carries no digest: none is checked)
//
// A coordinator that needs the whole Membership keeps its own and asks (MembershipRequest);
// a lost delta is so repaired once its next RoundProgress names what it holds. Workers are held sorted, so
// a Membership reached by deltas equals the whole one of its epoch, element for element.
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/transport/wire.hpp"  // the schema

namespace atl {

struct membership_view {
  std::uint64_t epoch = 0;
  std::vector<std::string> workers;  // sorted, no duplicates
  std::uint32_t quorum = 0;  // participants a round needs; 0: the coordinator's min_workers
  std::vector<std::string> keepers;  // every one must acknowledge a commit; empty: the head's
  // Keeper groups: `keepers` lists each group's in turn, this many each; empty: one group.
  std::vector<std::uint32_t> keeper_group_sizes;
  bool operator==(const membership_view& o) const {
    return epoch == o.epoch && workers == o.workers && quorum == o.quorum && keepers == o.keepers &&
           keeper_group_sizes == o.keeper_group_sizes;
  }
};

struct membership_delta {
  bool delta = false;  // false: `view.workers` is every worker
  std::uint64_t base_epoch = 0;  // the Membership it changes (a delta)
  membership_view view;  // epoch, quorum, keepers; workers: added (a delta) or all
  std::vector<std::string> removed;  // workers gone (a delta)
  std::uint64_t digest = 0;  // members_digest of the whole Membership it leads to
};

// A stable 64-bit digest of a whole Membership: epoch, workers (whatever their order), quorum
// and keepers.
std::uint64_t members_digest(const membership_view& view);

// The whole Membership (workers sorted), as sent on request or before any was published.
membership_delta whole_membership(membership_view view);
// What changed from `from` to `to` (base: from.epoch); a version check when they are equal.
membership_delta diff_membership(const membership_view& from, const membership_view& to);

// A coordinator's Membership, with its workers' hash sum kept as deltas are applied.
class held_membership {
 public:
  enum class verdict {
    changed,  // the Membership held is the sender's new one
    unchanged,  // a version check that passed, a duplicate, or one older than held
    needs_whole,  // a gap or a digest that differs: ask for the whole (held kept as it was)
  };
  verdict apply(const membership_delta& d);
  bool holds_any() const { return holds_; }
  const membership_view& view() const { return view_; }
  std::uint64_t digest() const;

 private:
  membership_view view_;
  std::uint64_t worker_sum_ = 0;
  bool holds_ = false;
};

// The keepers that acknowledge unit `unit`'s commits: its keeper group's
// (placement::keeper_group_of), or every one listed with one group. Empty: the head's (as
// an empty list always meant), also for sizes that do not add up to the list.
std::vector<std::string> keepers_of_unit(const membership_view& view, std::uint32_t unit);

// The Membership message: write and read (reading never fails; a list it lacks is empty).
void write_membership(const membership_delta& d, schema::Membership::Builder out);
membership_delta read_membership(schema::Membership::Reader in);

}  // namespace atl
