// How a coordinator starts: it asks the registry for the members, then its keepers for the
// committed state (every keeper with storage.keepers = nodes: it resumes from the newest),
// repeated until both answered; and resumes from the state it gets, or waits for rank 0 to
// seed a new run.
#include "actors/coordinator/startup.hpp"

#include <algorithm>
#include <map>

#include <caf/all.hpp>

#include "actors/decisions/placement.hpp"
#include "runtime/process/log.hpp"

namespace atl::coordinator_detail {
namespace {

// Resumes from a keeper's LoadReply (none found: a new run, seeded by rank 0); the shell
// then seeds or opens the next round.
void resume_from(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  st.load_replies.clear();
  bool resumed = false;
  const auto reply = msg.envelope().getLoadReply();
  const auto& t = msg.tensors();
  if (reply.getFound() && (t.size() == 2 || t.size() == 3)) {
    auto err = st.rounds->restore(reply.getRound(), t[0].to_floats(), t[1].to_floats(),
                                  t.size() == 3 ? t[2].to_floats() : std::vector<float>{});
    if (err) log_error(fragment_name(st) + ": restore failed: " + err.describe());
    else {
      log_info(fragment_name(st) + ": resumed at committed round " + std::to_string(reply.getRound()) + " from " +
               msg.sender());
      resumed = true;
    }
  }
  st.collect->loaded(resumed);
}

}  // namespace

// load_from_every_keeper: once every keeper of the Membership answered, the newest round
// (placement::resume_source).
bool resume_when_every_keeper_answered(self_ptr self) {
  auto& st = self->state;
  if (st.loaded()) return false;
  std::map<std::string, std::optional<std::uint64_t>> answered;
  for (const auto& [keeper, reply] : st.load_replies) {
    const auto load = reply->envelope().getLoadReply();
    const bool found = load.getFound() && (reply->tensors().size() == 2 || reply->tensors().size() == 3);
    answered[keeper] = found ? std::optional<std::uint64_t>(load.getRound()) : std::nullopt;
  }
  const auto source = placement::resume_source(st.commit.keepers(), answered);
  if (!source) return false;
  const auto reply = st.load_replies.at(*source);  // held here: resume_from clears the replies
  resume_from(self, *reply);
  return true;
}

bool on_load_reply(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (st.collect->started_as() != round_collect::startup::loading) return false;  // not asked, or started
  if (!st.cfg.load_from_every_keeper) {
    resume_from(self, *msg);
    return true;
  }
  const auto& keepers = st.commit.keepers();
  if (std::find(keepers.begin(), keepers.end(), msg->sender()) == keepers.end()) return false;
  st.load_replies[msg->sender()] = msg;
  return resume_when_every_keeper_answered(self);
}

// What a new coordinator needs before it can open a round: the committed state (from the
// keeper) and the members (from the registry). Repeated until both answered: a re-placed
// coordinator's first requests can be refused while its id still belongs to the old node.
void request_membership(self_ptr self) {
  auto& st = self->state;
  wire::outgoing out;
  out.envelope.initMembershipRequest().setFragment(st.cfg.fragment);
  st.mail->send(st.cfg.registry, st.epoch(), out);
}

// The membership comes first: the LoadRequest carries its epoch, from which on the keeper
// refuses commits of older coordinators of this fragment (one re-placed after its node died).
void request_startup_state(self_ptr self) {
  auto& st = self->state;
  if (!st.has_membership()) {
    request_membership(self);
  } else if (!st.loaded()) {
    const auto targets = st.cfg.load_from_every_keeper ? st.commit.keepers() : std::vector<std::string>{st.cfg.keeper};
    for (const auto& keeper : targets) {
      if (st.load_replies.count(keeper)) continue;
      wire::outgoing out;
      out.envelope.initLoadRequest().setFragment(st.cfg.fragment);
      st.mail->send(keeper, st.epoch(), out);
    }
  }
}

}  // namespace atl::coordinator_detail
