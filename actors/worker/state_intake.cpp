// A fragment's committed state coming in: asked of its coordinator (StateRequest), taken
// whole from a FragmentState or fetched in chunks from the keepers it names
// (actors/decisions/state_fetch.hpp decides the chunks and the keeper to try next), then
// adopted. Part of the worker (actors/worker/worker.cpp).
#include "actors/worker/state_intake.hpp"

#include <algorithm>

#include <caf/all.hpp>

#include "actors/shared/messages.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/log.hpp"

namespace atl {
namespace {

using self_ptr = worker_self;

// Fragment f's values as the replica holds them, and their digest.
std::uint64_t read_held(const worker_state& st, std::size_t f, std::vector<float>& values) {
  values.resize(st.model->fragment_size(f));
  st.model->read_fragment(f, values.data());
  return digest64(values.data(), values.size() * sizeof(float));
}

}  // namespace

void request_state(self_ptr self, std::size_t f) {
  auto& st = self->state;
  wire::outgoing out;
  auto req = out.envelope.initStateRequest();
  req.setFragment(static_cast<std::uint32_t>(f));
  // While the fragment holds its initial values, their digest: if that is the committed
  // state (a fresh run's round 0: every worker starts from the same seed), the state's
  // bytes are not sent. Trained values match no committed state: they are not read.
  if (st.fragments[f].never_adopted()) {
    std::vector<float> local;
    req.setHeldDigest(read_held(st, f, local));
    // Rank 0's parameters travel along once the coordinator said it needs them: a fresh
    // run is seeded from them (the others need not pay the bytes, nor does rank 0 once
    // the fragment is seeded).
    if (st.cfg.spec.rank == 0 && st.fragments[f].parameters_wanted())
      out.tensors.push_back(wire::tensor::from_floats(local.data(), local.size()));
  }
  req.setSkipsRound(st.fragments[f].skips_round());
  st.fragments[f].ask();
  st.mail->send(coordinator_id(static_cast<std::uint32_t>(f)), st.fragments[f].epoch(), out);
}

namespace {

// fragment f's committed state at `round` is here: it replaces the local fragment. The
// registry hears of it: a worker that resynced on its last round merges no result after.
// True unless the worker is past a later round and asked again (skip_rounds_started_past).
bool apply_state(self_ptr self, std::size_t f, std::uint64_t round, std::uint64_t epoch, std::vector<float> theta) {
  auto& st = self->state;
  st.model->adopt_global(f, theta.data());
  st.epoch = std::max(st.epoch, epoch);
  acknowledge_round(self, f, round, digest64(theta.data(), theta.size() * sizeof(float)), true);
  st.fragments[f].adopt(round, epoch, std::move(theta));
  st.trained[f] = {};  // what it trained on this fragment was replaced
  st.at_contribution[f].clear();  // nothing to carry over the next merge
  return !(st.step > 0 && skip_rounds_started_past(self, f));  // a joiner's start step is set later
}

}  // namespace

bool skip_rounds_started_past(self_ptr self, std::size_t f) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  if (!st.steps->recovers_rounds() || frag.current() != fragment_sync::phase::synced) return false;
  const auto past = st.schedule->last_round_by(static_cast<std::int64_t>(f), st.step);
  if (past <= frag.round() || !frag.skip(past, st.now(), state_retry)) return false;
  log_warn(st.cfg.id + ": at step " + std::to_string(st.step) + ", past round " + std::to_string(past) +
           " of fragment " + std::to_string(f) + " with round " + std::to_string(frag.round()) +
           "; asking its coordinator to go on without us");
  request_state(self, f);
  return true;
}

// Asks the fetch's current keeper for the next chunk of fragment f's state.
void request_chunk(self_ptr self, std::size_t f) {
  auto& st = self->state;
  auto& frag = st.fragments[f];
  const auto req = frag.fetch().next_request();
  wire::outgoing out;
  auto c = out.envelope.initChunkRequest();
  c.setFragment(static_cast<std::uint32_t>(f));
  c.setRound(frag.fetch().round());
  c.setOffset(req.offset);
  c.setCount(req.count);
  st.mail->send(req.keeper, frag.epoch(), out);
  frag.chunk_asked(st.now());
}

// The keeper asked cannot serve: the next one resumes the transfer; once every keeper has
// failed a few times, the coordinator is asked for the state again.
void fetch_elsewhere(self_ptr self, std::size_t f, const std::string& why) {
  auto& st = self->state;
  auto& fetch = st.fragments[f].fetch();
  const std::string from = fetch.source();
  if (!fetch.next_source()) {
    log_warn(st.cfg.id + ": no keeper could serve fragment " + std::to_string(f) + "; asking its coordinator again");
    request_state(self, f);
    return;
  }
  log_warn(st.cfg.id + ": " + from + " " + why + "; fetching fragment " + std::to_string(f) + " from " +
           fetch.source() + " at value " + std::to_string(fetch.received()));
  request_chunk(self, f);
}

// Adopts the state a FragmentState carries, or starts fetching it in chunks.
bool adopt_state(self_ptr self, const wire::message_ptr& msg, std::size_t f, std::uint64_t round) {
  auto& st = self->state;
  for (const auto d : msg->envelope().getFragmentState().getDonors())  // for a warm start
    if (std::find(st.donors.begin(), st.donors.end(), d.cStr()) == st.donors.end()) st.donors.push_back(d);
  if (msg->tensors().size() == 1) return apply_state(self, f, round, msg->epoch(), msg->tensors()[0].to_floats());
  const auto header = msg->envelope().getFragmentState();
  std::vector<float> held;
  if (st.fragments[f].never_adopted() && read_held(st, f, held) == header.getDigest()) {
    log_info(st.cfg.id + ": holds fragment " + std::to_string(f) + " round " + std::to_string(round) +
             " already (digest " + digest_hex(header.getDigest()) + "); nothing fetched");
    return apply_state(self, f, round, msg->epoch(), std::move(held));
  }
  std::vector<std::string> keepers;
  for (const auto k : header.getKeepers()) keepers.push_back(k);
  st.fragments[f].start_fetch(state_fetch(round, header.getCount(), header.getDigest(), std::move(keepers),
                                          static_cast<std::uint64_t>(st.cfg.run.state_chunk_values)),
                              msg->epoch());
  request_chunk(self, f);
  return false;
}

bool on_chunk(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto reply = msg->envelope().getChunkReply();
  const std::size_t f = reply.getFragment();
  if (f >= st.fragments.size()) return false;
  auto& frag = st.fragments[f];
  std::vector<float> values;
  if (reply.getFound() && msg->tensors().size() == 1 && msg->tensors()[0].dtype == schema::DType::FLOAT32)
    values = msg->tensors()[0].to_floats();
  switch (frag.fetch().on_reply(msg->sender(), reply.getRound(), reply.getOffset(), reply.getFound(), values)) {
    case state_fetch::outcome::ignored: return false;
    case state_fetch::outcome::more: request_chunk(self, f); return false;
    case state_fetch::outcome::failed:
      fetch_elsewhere(self, f, "cannot serve round " + std::to_string(reply.getRound()));
      return false;
    case state_fetch::outcome::done:
      log_info(st.cfg.id + ": fetched fragment " + std::to_string(f) + " round " +
               std::to_string(frag.fetch().round()) + " (" + std::to_string(frag.fetch().received()) +
               " values) in chunks, last from " + frag.fetch().source());
      return apply_state(self, f, frag.fetch().round(), frag.fetch_epoch(), frag.fetch().take_values());
  }
  return false;
}

}  // namespace atl
