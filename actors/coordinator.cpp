#include "actors/coordinator.hpp"
#include "runtime/actor_id.hpp"

#include <algorithm>
#include <map>
#include <optional>

#include <caf/all.hpp>

#include "actors/commit_record.hpp"
#include "actors/messages.hpp"
#include "actors/placement.hpp"
#include "actors/pseudo_gradient.hpp"
#include "actors/quorum.hpp"
#include "runtime/digest.hpp"
#include "runtime/fault_point.hpp"
#include "runtime/log.hpp"

namespace atl {
namespace {

using self_ptr = caf::stateful_actor<coordinator_state>*;

std::string fragment_name(const coordinator_state& st) { return "coordinator " + std::to_string(st.cfg.fragment); }

// What the quorum policy (actors/quorum.hpp) is asked about this fragment.
quorum::view policy_view(const coordinator_state& st) {
  quorum::view v;
  v.has_membership = st.has_membership;
  v.members = st.members.size();
  v.published = st.quorum;
  v.round_open = st.rounds->current_phase() == round_tracker::phase::collecting;
  if (v.round_open) {
    v.participants = st.rounds->participants().size();
    v.contributed = st.rounds->contributors().size();
    if (v.contributed > 0) v.first_contribution = st.round_started;
  }
  return v;
}

quorum::options policy_options(const coordinator_state& st) { return {st.cfg.min_workers, st.cfg.round_deadline}; }

bool membership_ready(const coordinator_state& st) {
  return quorum::members_suffice(policy_view(st), policy_options(st));
}

// The committing round's record: the contributions it averaged, as received and in the
// order they were averaged in (worker id), or its fp32 average when that is fewer bytes.
round_record record_of_round(const coordinator_state& st, std::uint64_t theta_digest) {
  round_record r;
  r.fragment = st.cfg.fragment;
  r.round = st.rounds->committed_round();
  r.epoch = st.epoch;
  r.count = st.rounds->theta().size();
  r.theta_digest = theta_digest;
  r.rule = st.rounds->rule_of_rounds();
  std::uint64_t bytes = 0;
  for (const auto& worker : st.rounds->contributors()) {
    const auto& msg = *st.round_inputs.at(worker);
    const auto c = msg.envelope().getContribution();
    round_input in;
    in.worker = worker;
    in.weight = c.getWeight();
    in.codec = static_cast<codec_kind>(c.getCodec());
    in.chunk = c.getChunk();
    in.payload = msg.tensors()[0].data;  // take_contribution checked the frames
    if (msg.tensors().size() > 1) in.scales = msg.tensors()[1].data;
    bytes += in.payload.size() + in.scales.size();
    r.inputs.push_back(std::move(in));
  }
  if (log_the_average(bytes, r.count)) {
    const auto& average = st.rounds->last_average();
    round_input in;
    const auto* first = reinterpret_cast<const std::uint8_t*>(average.data());
    in.payload = byte_buffer(first, first + average.size() * sizeof(float));
    r.inputs = {std::move(in)};
    r.averaged = true;
  }
  return r;
}

// The committing round's frames (state::committing), made once per round.
const coordinator_state::committing_frames& frames_to_commit(coordinator_state& st) {
  const auto round = st.rounds->committed_round();
  if (!st.committing || st.committing->round != round) {
    const auto& theta = st.rounds->theta();
    coordinator_state::committing_frames c;
    c.round = round;
    if (round == 0) {
      const auto& momentum = st.rounds->momentum();
      c.theta = wire::tensor::from_floats_hashed(theta.data(), theta.size());
      c.theta_digest = *c.theta->checksum;
      c.tensors = {*c.theta, wire::tensor::from_floats_hashed(momentum.data(), momentum.size())};
    } else {
      c.theta_digest = digest64(theta.data(), theta.size() * sizeof(float));
      c.record = record_of_round(st, c.theta_digest);
      c.tensors = record_tensors(*c.record);
    }
    for (const auto& t : c.tensors) c.bytes += t.data.size();
    st.committing = std::move(c);
  }
  return *st.committing;
}

// theta_global of the committing round as a frame (fp32 results carry it), made once.
const wire::tensor& committing_theta(coordinator_state& st) {
  auto& c = const_cast<coordinator_state::committing_frames&>(frames_to_commit(st));
  if (!c.theta) c.theta = wire::tensor::from_floats_hashed(st.rounds->theta().data(), st.rounds->theta().size());
  return *c.theta;
}

// The committing round's full state as frames (theta, momentum, and the residual when
// there is one), made once: for keepers that cannot follow its record.
const std::vector<wire::tensor>& committing_full_state(coordinator_state& st) {
  auto& c = const_cast<coordinator_state::committing_frames&>(frames_to_commit(st));
  if (c.full_state.empty()) {
    const auto& momentum = st.rounds->momentum();
    const auto& residual = st.rounds->residual();
    c.full_state = {committing_theta(st), wire::tensor::from_floats_hashed(momentum.data(), momentum.size())};
    if (!residual.empty()) c.full_state.push_back(wire::tensor::from_floats(residual.data(), residual.size()));
  }
  return c.full_state;
}

// The committing round to one keeper: its record, or the full state to a keeper behind.
void send_commit_to(coordinator_state& st, const std::string& keeper) {
  const auto& frames = frames_to_commit(st);
  wire::outgoing out;
  auto req = out.envelope.initCommitRequest();
  const bool full = !frames.record || st.commit.needs_full_state(keeper);
  if (!full) put_commit_record(req, *frames.record);
  req.setFragment(st.cfg.fragment);
  req.setRound(frames.round);
  out.tensors = full ? (frames.record ? committing_full_state(st) : frames.tensors) : frames.tensors;
  st.mail->send(keeper, st.epoch, out);
}

// The committing round to every keeper that has not acknowledged it yet (one copy of the
// frames, shared by the messages).
void send_commit(self_ptr self) {
  auto& st = self->state;
  for (const auto& keeper : st.commit.unacknowledged()) send_commit_to(st, keeper);
  st.commit.sent(st.now());
}

// A round entered phase committing: no keeper has it yet.
void start_commit(self_ptr self) {
  auto& st = self->state;
  st.commit.start(st.rounds->committed_round(), frames_to_commit(st).bytes);
  log_debug(fragment_name(st) + ": committing round " + std::to_string(st.rounds->committed_round()) + ", " +
            std::to_string(std::chrono::duration<double>(st.now() - st.last_contribution).count()) +
            " s after the last contribution arrived");
  send_commit(self);
}

// The committed state of the fragment: inline, or for a large fragment a header naming the
// keepers the worker fetches it from in chunks (every keeper has the committed round).
void send_state(self_ptr self, const std::string& worker) {
  auto& st = self->state;
  const auto& theta = st.rounds->theta();
  wire::outgoing out;
  auto fs = out.envelope.initFragmentState();
  fs.setFragment(st.cfg.fragment);
  fs.setRound(st.rounds->committed_round());
  if (theta.size() <= st.cfg.state_chunk_values) {
    out.tensors.push_back(wire::tensor::from_floats(theta.data(), theta.size()));
  } else {
    fs.setCount(theta.size());
    fs.setDigest(digest64(theta.data(), theta.size() * sizeof(float)));
    const auto& every = st.commit.keepers();
    auto keepers = fs.initKeepers(static_cast<unsigned>(every.size()));
    for (unsigned i = 0; i < every.size(); ++i) keepers.set(i, every[i]);
  }
  st.mail->send(worker, st.rounds->open_epoch(), out);
}

// Contributions held before their round opens: one per sender, at most this many senders.
constexpr std::size_t max_early = 4096;

bool is_participant(const coordinator_state& st, const std::string& worker) {
  return st.rounds->current_phase() == round_tracker::phase::collecting && st.rounds->participants().count(worker);
}

bool is_member(const coordinator_state& st, const std::string& worker) {
  return std::find(st.members.begin(), st.members.end(), worker) != st.members.end();
}

// A member outside the open round (admitted after it opened) gets the committed state in
// DiLoCo: it may be a participant of another fragment's open round, and must train to reach
// it. Held here until our next round, it would wait on this round, which waits on the
// others' contributions, which (streaming) wait on that other round's result, which waits
// on it. Once its contribution to this round was refused (not_participant), its requests
// are held until a round includes it: no refusal loop. Until then a repeat is answered
// again (the state may have been lost).
bool answers_outside_round(const coordinator_state& st, const std::string& worker) {
  return st.loaded && st.rounds->rule() == round_tracker::update_rule::nesterov &&
         st.rounds->current_phase() == round_tracker::phase::collecting && is_member(st, worker) &&
         !st.rounds->participants().count(worker) && !st.refused_outside.count(worker);
}

// The epoch a refusal carries: the open round's, so a worker refused as stale_epoch can
// send the same contribution again in the right epoch.
std::uint64_t refusal_epoch(const coordinator_state& st) {
  return st.rounds->current_phase() == round_tracker::phase::collecting ? st.rounds->open_epoch() : st.epoch;
}

void on_contribution(self_ptr self, const wire::message_ptr& msg);
void finish_commit_if_acked(self_ptr self);
void request_startup_state(self_ptr self);

// In phase ready with enough members: open the next round, give the committed state to
// the held requests of its participants (the others wait for a round that includes them:
// a worker that is not a participant could not contribute; but see answers_outside_round),
// then replay contributions that came before the round opened.
void advance(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::ready || !membership_ready(st)) return;
  if (auto err = st.rounds->open(st.epoch, st.members)) {
    log_warn(fragment_name(st) + ": cannot open round: " + err.describe());
    return;
  }
  st.round_bytes = 0;
  st.refused_outside.clear();
  st.round_inputs.clear();
  std::vector<wire::message_ptr> still_waiting;
  for (const auto& req : st.waiting) {
    if (is_participant(st, req->sender())) send_state(self, req->sender());
    else still_waiting.push_back(req);
  }
  if (st.announce_on_open) {
    for (const auto& worker : st.members)
      if (std::none_of(st.waiting.begin(), st.waiting.end(),
                       [&](const wire::message_ptr& held) { return held->sender() == worker; }))
        send_state(self, worker);
    st.announce_on_open = false;
  }
  st.waiting = std::move(still_waiting);
  auto early = std::move(st.early);
  st.early.clear();
  for (const auto& [_, msg] : early) on_contribution(self, msg);
}

// An unseeded run: the first held request that carries parameters becomes round 0.
void seed_from_waiting(self_ptr self) {
  auto& st = self->state;
  if (!st.loaded || st.rounds->current_phase() != round_tracker::phase::unseeded) return;
  for (const auto& req : st.waiting) {
    if (req->tensors().size() != 1 || req->tensors()[0].dtype != schema::DType::FLOAT32) continue;
    if (auto err = st.rounds->seed(req->tensors()[0].to_floats())) {
      log_warn(fragment_name(st) + ": cannot seed from " + req->sender() + ": " + err.describe());
      continue;
    }
    start_commit(self);
    return;
  }
}

void release(self_ptr self, const std::vector<std::string>& contributors);

// A round has every contribution: commit it (DiLoCo) or release the average (ddp).
void on_round_complete(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->rule() == round_tracker::update_rule::nesterov) {
    start_commit(self);
    return;
  }
  const auto contributors = st.rounds->contributors();
  (void)st.rounds->committed();
  release(self, contributors);
}

void on_contribution(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto c = msg->envelope().getContribution();
  // Held, one per sender, until the next round opens: for the round about to open (its
  // membership is not ready yet; a worker that got the last result contributes at once), or
  // anything before this coordinator has loaded its state (a re-placed one, receiving
  // resends).
  const bool about_to_open = st.rounds->current_phase() == round_tracker::phase::ready &&
                             c.getRound() == st.rounds->open_round() && is_member(st, msg->sender());
  const bool starting = !st.loaded || st.rounds->current_phase() == round_tracker::phase::unseeded;
  if ((about_to_open || starting) && (st.early.count(msg->sender()) || st.early.size() < max_early)) {
    st.early[msg->sender()] = msg;
    return;
  }
  const auto arrived = st.now();
  auto values = st.rounds->contribution_buffer();
  if (auto err = take_contribution(*msg, st.rounds->theta().size(), values)) {
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + err.describe());
    st.mail->refuse(*msg, err, refusal_epoch(st));
    return;
  }
  if (st.rounds->contributors().empty()) {
    st.round_started = st.now();
    if (st.cfg.round_deadline.count() > 0)
      self->delayed_send(self, st.cfg.round_deadline, deadline_atom::value, st.rounds->open_round());
  }
  auto done = st.rounds->add(msg->sender(), msg->epoch(), c.getRound(), std::move(values), c.getWeight());
  if (done) st.round_inputs[msg->sender()] = msg;
  if (!done) {
    if (done.err().code == errc::not_participant) st.refused_outside.insert(msg->sender());
    log_warn(fragment_name(st) + ": refused contribution of " + msg->sender() + ": " + done.err().describe());
    st.mail->refuse(*msg, done.err(), refusal_epoch(st));
    return;
  }
  st.round_bytes += msg->wire_bytes();
  st.last_contribution = arrived;
  if (*done) on_round_complete(self);
}

// The committed round, to the registry (its views and the metrics file).
void report_round(self_ptr self, const std::vector<std::string>& contributors, std::uint64_t digest) {
  auto& st = self->state;
  wire::outgoing out;
  auto report = out.envelope.initRoundReport();
  report.setFragment(st.cfg.fragment);
  report.setRound(st.rounds->committed_round());
  report.setEpoch(st.rounds->open_epoch());
  report.setDigest(digest);
  auto names = report.initParticipants(static_cast<unsigned>(contributors.size()));
  for (unsigned i = 0; i < contributors.size(); ++i) names.set(i, contributors[i]);
  report.setDurationS(static_cast<float>(std::chrono::duration<double>(st.now() - st.round_started).count()));
  report.setSinceLastContributionS(
      static_cast<float>(std::chrono::duration<double>(st.now() - st.last_contribution).count()));
  report.setBytes(st.round_bytes);
  st.mail->send(st.cfg.registry, st.epoch, out);
}

// The result of `round` to every one of `receivers`: whole (the encoded change in `update`
// when there is one, else theta_global), provisional (the same, held unapplied until the
// round is committed), or a confirmation of the provisional one (no tensors). One set of
// frames is shared by every result. Workers in this process last: one that finishes on its
// result may end the process (a node whose workers are done exits), and by then every other
// result is on its link.
enum class result_form { whole, provisional, confirmation };

void send_results(coordinator_state& st, std::vector<std::string> receivers, std::uint64_t round, std::uint64_t epoch,
                  std::uint64_t digest, const wire::tensor* theta, const std::optional<round_update_frames>& update,
                  result_form form) {
  std::stable_partition(receivers.begin(), receivers.end(),
                        [&](const std::string& w) { return !st.mail->delivers_in_process(w); });
  for (const auto& worker : receivers) {
    wire::outgoing out;
    auto r = out.envelope.initRoundResult();
    r.setFragment(st.cfg.fragment);
    r.setRound(round);
    r.setDigest(digest);
    r.setProvisional(form == result_form::provisional);
    r.setConfirms(form == result_form::confirmation);
    if (form != result_form::confirmation) {
      if (update) put_round_update(r, *update, out);
      else if (theta) out.tensors.push_back(*theta);
    }
    st.mail->send(worker, epoch, out);
  }
}

std::optional<round_update_frames> released_update_frames(const coordinator_state& st) {
  if (const auto* u = st.rounds->released_update()) return make_round_update_frames(encoded_values(*u));
  return std::nullopt;
}

// Early results: once every keeper has the whole CommitRequest (its `writing` notice), a
// DiLoCo round's result goes to its contributors while the keepers write it, so that the
// results travel during the keepers' write, fdatasync and acknowledgement instead of after
// them, and do not slow the commit's own bytes; release() then only confirms it. Nobody
// applies a round before every keeper has it on disk (S4).
void send_provisional_results_once_received(self_ptr self) {
  auto& st = self->state;
  const auto round = st.rounds->committed_round();
  if (!st.cfg.early_results || st.rounds->current_phase() != round_tracker::phase::committing || round == 0 ||
      st.rounds->rule() != round_tracker::update_rule::nesterov || st.provisional_round == round)
    return;
  if (!st.commit.every_keeper_has_it()) return;
  const auto update = released_update_frames(st);
  send_results(st, st.rounds->contributors(), round, st.epoch, frames_to_commit(st).theta_digest,
               update ? nullptr : &committing_theta(st), update, result_form::provisional);
  st.provisional_round = round;
  ATL_FAULT_POINT("coordinator.provisional");
}

// Whether the round's result went out provisional (release only confirms it), and the
// encoded change a whole result carries (none: theta itself).
std::pair<bool, std::optional<round_update_frames>> confirm_or_update(const coordinator_state& st,
                                                                      std::uint64_t round) {
  return {st.provisional_round == round, released_update_frames(st)};
}

void release(self_ptr self, const std::vector<std::string>& contributors) {
  auto& st = self->state;
  const auto& result = st.rounds->result();
  const auto round = st.rounds->committed_round();
  // Low-bit results: the round's encoded change, which every contributor adds to its copy
  // of the previous theta_global (round_tracker.hpp); else theta_global itself. A committed
  // DiLoCo round's theta_global is what its commit carried: those frames and their digest
  // serve again (a ddp average was never committed).
  const bool nesterov = st.rounds->rule() == round_tracker::update_rule::nesterov;
  const auto update = confirm_or_update(st, round);
  std::optional<wire::tensor> theta;  // what a result carries without an update
  std::uint64_t digest = 0;
  if (nesterov) {
    digest = frames_to_commit(st).theta_digest;
    if (!update.second) theta = committing_theta(st);
  } else {
    theta = wire::tensor::from_floats_hashed(result.data(), result.size());
    digest = *theta->checksum;
  }
  st.committing.reset();  // the messages hold what they share
  const bool confirm = update.first;
  st.provisional_round.reset();
  // The registry hears of the round before any worker can: a worker's WorkerDone after its
  // last result must not reach the registry before the round that result belongs to.
  report_round(self, contributors, digest);
  advance(self);  // the next round opens first (results carry its epoch); it resets the counters
  const auto form = confirm ? result_form::confirmation : result_form::whole;
  send_results(st, contributors, round, st.rounds->open_epoch(), digest, theta ? &*theta : nullptr,
               confirm ? std::nullopt : update.second, form);
}

// Round `round` is round_deadline old. The quorum policy closes it with the contributions
// it has if they are a quorum and a majority of its participants (no split brain);
// otherwise the deadline is looked at again later.
void on_deadline(self_ptr self, std::uint64_t round) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::collecting || st.rounds->open_round() != round) return;
  const auto participants = st.rounds->participants().size();
  const auto contributed = st.rounds->contributors().size();
  const auto verdict = quorum::decide(policy_view(st), policy_options(st), st.now());
  expected<bool> done = false;
  if (verdict.what == quorum::decision::close) done = st.rounds->close_at_deadline(verdict.needed);
  if (done && *done) {
    log_warn(fragment_name(st) + ": round " + std::to_string(round) + " closed at its deadline with " +
             std::to_string(contributed) + " of " + std::to_string(participants) + " participants");
    on_round_complete(self);
    return;
  }
  self->delayed_send(self, st.cfg.round_deadline, deadline_atom::value, round);
}

void resume_when_every_keeper_answered(self_ptr self);

void on_membership(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto m = msg->envelope().getMembership();
  if (m.getEpoch() < st.epoch) return;  // an older view arriving late
  st.epoch = m.getEpoch();
  st.members.clear();
  for (const auto w : m.getWorkers()) st.members.push_back(w);
  st.quorum = m.getQuorum();
  const bool first = !st.has_membership;
  st.has_membership = true;
  // The keepers a commit needs. A keeper removed (its node died) no longer holds a round
  // up; one added gets the committing round at the next tick.
  std::vector<std::string> keepers;
  for (const auto k : m.getKeepers()) keepers.push_back(k);
  if (keepers.empty()) keepers.push_back(st.cfg.keeper);
  st.commit.set_keepers(std::move(keepers));
  if (first) request_startup_state(self);  // now the keepers
  if (st.cfg.load_from_every_keeper) resume_when_every_keeper_answered(self);  // one removed may have been awaited
  finish_commit_if_acked(self);
  send_provisional_results_once_received(self);  // the keeper not yet writing may be the one removed
  if (st.rounds->current_phase() == round_tracker::phase::collecting) {
    const auto participants = st.rounds->participants();
    for (const auto& p : participants) {
      if (std::find(st.members.begin(), st.members.end(), p) != st.members.end()) continue;
      log_warn(fragment_name(st) + ": " + p + " left; round " + std::to_string(st.rounds->open_round()) +
               " goes on without it");
      auto done = st.rounds->drop(p);
      if (done && *done) on_round_complete(self);
    }
  }
  advance(self);
}

template <class List, class Names>
void fill_names(List list, const Names& names) {
  unsigned i = 0;
  for (const auto& n : names) list.set(i++, n);
}

// Where the round is, to the registry every tick (RoundProgress; `atollctl explain`).
void report_progress(self_ptr self) {
  auto& st = self->state;
  const auto phase = st.rounds->current_phase();
  const auto contributors = st.rounds->contributors();
  const bool collecting = phase == round_tracker::phase::collecting;
  const bool committing = phase == round_tracker::phase::committing;
  const auto round = committing ? st.rounds->committed_round() : st.rounds->open_round();
  const auto key = std::string(to_string(phase)) + "/" + std::to_string(round) + "/" +
                   std::to_string(contributors.size()) + "/" + std::to_string(st.commit.acknowledged().size());
  if (key != st.progress_key) {
    st.progress_key = key;
    st.progress_since = st.now();
  }
  wire::outgoing out;
  auto p = out.envelope.initRoundProgress();
  p.setFragment(st.cfg.fragment);
  p.setRound(round);
  p.setPhase(to_string(phase));
  if (collecting) {
    fill_names(p.initParticipants(static_cast<unsigned>(st.rounds->participants().size())), st.rounds->participants());
    fill_names(p.initContributors(static_cast<unsigned>(contributors.size())), contributors);
    if (!contributors.empty())
      p.setOpenForS(static_cast<float>(std::chrono::duration<double>(st.now() - st.round_started).count()));
  }
  if (committing) {
    fill_names(p.initKeepers(static_cast<unsigned>(st.commit.keepers().size())), st.commit.keepers());
    fill_names(p.initAcked(static_cast<unsigned>(st.commit.acknowledged().size())), st.commit.acknowledged());
  }
  p.setPhaseForS(static_cast<float>(std::chrono::duration<double>(st.now() - st.progress_since).count()));
  st.mail->send(st.cfg.registry, st.epoch, out);
}

void on_commit_ack(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto ack = msg->envelope().getCommitAck();
  if (st.rounds->current_phase() != round_tracker::phase::committing || ack.getRound() != st.rounds->committed_round())
    return;  // a duplicate or late ack: the round was already settled
  using answer = commit_barrier::answer;
  const auto what = ack.getWriting()  ? answer::writing
                    : ack.getOk()     ? answer::acknowledged
                    : ack.getBehind() ? answer::behind
                                      : answer::refused;
  switch (st.commit.on_answer(msg->sender(), ack.getRound(), what)) {
    case commit_barrier::action::early_results: send_provisional_results_once_received(self); break;
    case commit_barrier::action::send_full_state:
      log_info(fragment_name(st) + ": " + msg->sender() + " lacks round " + std::to_string(ack.getRound() - 1) +
               "; sending it round " + std::to_string(ack.getRound()) + "'s full state");
      send_commit_to(st, msg->sender());
      break;
    case commit_barrier::action::committed:
      log_debug(fragment_name(st) + ": " + msg->sender() + " acknowledged round " + std::to_string(ack.getRound()) +
                " (" + std::to_string(st.commit.tries()) + " tries; " +
                std::to_string(std::chrono::duration<double>(st.now() - st.commit.last_sent()).count()) +
                " s after the last)");
      finish_commit_if_acked(self);
      break;
    case commit_barrier::action::none:
      if (what == answer::refused)  // sent again when a retry is due
        log_error(fragment_name(st) + ": " + msg->sender() + " refused round " + std::to_string(ack.getRound()) + ": " +
                  ack.getError().cStr() + "; retrying");
      else if (what == answer::acknowledged)
        log_debug(fragment_name(st) + ": " + msg->sender() + " acknowledged round " + std::to_string(ack.getRound()) +
                  " (" + std::to_string(st.commit.tries()) + " tries; " +
                  std::to_string(std::chrono::duration<double>(st.now() - st.commit.last_sent()).count()) +
                  " s after the last)");
      break;
  }
}

// Every keeper has the committing round on disk: it is committed. Round 0 (the seed) opens
// the first round; any other is released to its contributors.
void finish_commit_if_acked(self_ptr self) {
  auto& st = self->state;
  if (st.rounds->current_phase() != round_tracker::phase::committing || !st.commit.committed()) return;
  st.commit.finish();
  const auto round = st.rounds->committed_round();
  const auto contributors = st.rounds->contributors();
  (void)st.rounds->committed();
  if (round > 0) ATL_FAULT_POINT("coordinator.committed");
  if (round == 0) {
    st.committing.reset();  // no result shares the seed's frames
    log_info(fragment_name(st) + ": seeded round 0 (" + std::to_string(st.rounds->theta().size()) + " parameters)");
    advance(self);
    return;
  }
  release(self, contributors);
}

// Resumes from a keeper's LoadReply (none found: a new run, seeded by rank 0).
void resume_from(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  st.loaded = true;
  st.load_replies.clear();
  const auto reply = msg.envelope().getLoadReply();
  const auto& t = msg.tensors();
  if (reply.getFound() && (t.size() == 2 || t.size() == 3)) {
    auto err = st.rounds->restore(reply.getRound(), t[0].to_floats(), t[1].to_floats(),
                                  t.size() == 3 ? t[2].to_floats() : std::vector<float>{});
    if (err) log_error(fragment_name(st) + ": restore failed: " + err.describe());
    else {
      log_info(fragment_name(st) + ": resumed at committed round " + std::to_string(reply.getRound()) + " from " +
               msg.sender());
      st.announce_on_open = true;
    }
  }
  seed_from_waiting(self);
  advance(self);
}

// load_from_every_keeper: once every keeper of the Membership answered, the newest round
// (placement::resume_source).
void resume_when_every_keeper_answered(self_ptr self) {
  auto& st = self->state;
  if (st.loaded) return;
  std::map<std::string, std::optional<std::uint64_t>> answered;
  for (const auto& [keeper, reply] : st.load_replies) {
    const auto load = reply->envelope().getLoadReply();
    const bool found = load.getFound() && (reply->tensors().size() == 2 || reply->tensors().size() == 3);
    answered[keeper] = found ? std::optional<std::uint64_t>(load.getRound()) : std::nullopt;
  }
  const auto source = placement::resume_source(st.commit.keepers(), answered);
  if (!source) return;
  const auto reply = st.load_replies.at(*source);  // held here: resume_from clears the replies
  resume_from(self, *reply);
}

void on_load_reply(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (st.loaded) return;
  if (!st.cfg.load_from_every_keeper) {
    resume_from(self, *msg);
    return;
  }
  const auto& keepers = st.commit.keepers();
  if (std::find(keepers.begin(), keepers.end(), msg->sender()) == keepers.end()) return;
  st.load_replies[msg->sender()] = msg;
  resume_when_every_keeper_answered(self);
}

// A held StateRequest is answered with StateHeld, so that rank 0 stops attaching its
// parameters (F bytes every retry, on a slow link) once the fragment can be seeded without.
void say_held(self_ptr self, const wire::message& request) {
  auto& st = self->state;
  const bool seeded = st.loaded && st.rounds->current_phase() != round_tracker::phase::unseeded;
  const bool parameters_held = std::any_of(st.waiting.begin(), st.waiting.end(),
                                           [](const wire::message_ptr& held) { return !held->tensors().empty(); });
  wire::outgoing out;
  auto held = out.envelope.initStateHeld();
  held.setFragment(st.cfg.fragment);
  held.setSeedHeld(seeded || parameters_held);
  st.mail->send(request.sender(), st.epoch, out);
}

void on_state_request(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  // Answered now only if the worker can contribute to the open round: it is a participant
  // and has not contributed yet. Otherwise held until a round opens that includes it, so a
  // joiner or a resyncing worker is never refused as not_participant in a loop.
  const auto& contributors = st.rounds->contributors();
  const bool can_answer = st.loaded && membership_ready(st) && is_participant(st, msg->sender()) &&
                          std::find(contributors.begin(), contributors.end(), msg->sender()) == contributors.end();
  if (can_answer) {
    send_state(self, msg->sender());
    return;
  }
  if (answers_outside_round(st, msg->sender())) {
    send_state(self, msg->sender());
    return;
  }
  // One held request per worker: its retries replace it, so it is answered once.
  auto same = std::find_if(st.waiting.begin(), st.waiting.end(),
                           [&](const wire::message_ptr& held) { return held->sender() == msg->sender(); });
  if (same == st.waiting.end()) st.waiting.push_back(msg);
  else if (msg->tensors().size() >= (*same)->tensors().size()) *same = msg;  // keep the one with parameters
  seed_from_waiting(self);
  say_held(self, *msg);
}

// What a new coordinator needs before it can open a round: the committed state (from the
// keeper) and the members (from the registry). Repeated until both answered: a re-placed
// coordinator's first requests can be refused while its id still belongs to the old node.
void request_membership(self_ptr self) {
  auto& st = self->state;
  wire::outgoing out;
  out.envelope.initMembershipRequest().setFragment(st.cfg.fragment);
  st.mail->send(st.cfg.registry, st.epoch, out);
}

// The membership comes first: the LoadRequest carries its epoch, from which on the keeper
// refuses commits of older coordinators of this fragment (one re-placed after its node died).
void request_startup_state(self_ptr self) {
  auto& st = self->state;
  if (!st.has_membership) {
    request_membership(self);
  } else if (!st.loaded) {
    const auto targets = st.cfg.load_from_every_keeper ? st.commit.keepers() : std::vector<std::string>{st.cfg.keeper};
    for (const auto& keeper : targets) {
      if (st.load_replies.count(keeper)) continue;
      wire::outgoing out;
      out.envelope.initLoadRequest().setFragment(st.cfg.fragment);
      st.mail->send(keeper, st.epoch, out);
    }
  }
}

}  // namespace

coordinator_config coordinator_config_for(const run_config& run, std::uint32_t fragment) {
  coordinator_config cc;
  cc.fragment = fragment;
  cc.min_workers = static_cast<std::size_t>(run.min_workers);
  cc.outer = {static_cast<float>(run.outer_lr), static_cast<float>(run.outer_momentum)};
  cc.average_only = run.mode == "ddp";
  cc.round_deadline = std::chrono::milliseconds(run.round_deadline_ms);
  cc.state_chunk_values = static_cast<std::size_t>(run.state_chunk_values);
  const auto codec = parse_codec(run.codec);  // validated with the config
  if (codec && !cc.average_only) cc.result_codec = *codec;
  cc.result_chunk = static_cast<std::size_t>(run.codec_chunk);
  cc.load_from_every_keeper = run.keepers == "nodes";
  cc.early_results = run.early_results;
  return cc;
}

caf::behavior coordinator_actor(caf::stateful_actor<coordinator_state>* self, transport* net, std::string cluster_id,
                                coordinator_config cfg) {
  auto& st = self->state;
  st.cfg = cfg;
  st.clock = &self->clock();
  st.commit.set_keepers({cfg.keeper});  // until the Membership names them
  st.mail = std::make_unique<mailer>(*net, coordinator_id(cfg.fragment), cluster_id);
  st.rounds = std::make_unique<round_tracker>(
      cfg.fragment, cfg.outer,
      cfg.average_only ? round_tracker::update_rule::average_only : round_tracker::update_rule::nesterov);
  st.rounds->encode_results(cfg.result_codec, cfg.result_chunk);
  request_startup_state(self);
  self->delayed_send(self, cfg.commit_retry, tick_atom::value);
  return {
      [=](const wire::message_ptr& msg) {
        auto& st = self->state;
        const auto env = msg->envelope();
        if (env.isStateRequest()) on_state_request(self, msg);
        else if (env.isContribution()) on_contribution(self, msg);
        else if (env.isCommitAck()) on_commit_ack(self, msg);
        else if (env.isLoadReply()) on_load_reply(self, msg);
        else if (env.isMembership()) on_membership(self, msg);
        else if (env.isRefusal()) {
          log_warn(fragment_name(st) + ": refusal from " + msg->sender() + ": " + env.getRefusal().getMessage().cStr());
        } else {
          st.mail->refuse(*msg, make_error(errc::unexpected_message, wire::kind_name(msg->kind())), st.epoch);
        }
      },
      [=](deadline_atom, std::uint64_t round) { on_deadline(self, round); },
      [=](confirm_atom) { request_membership(self); },  // placed again: a restarted head learns we run
      [=](tick_atom) {  // every commit_retry: startup requests until answered, commit retries
        auto& st = self->state;
        if (!st.loaded || !st.has_membership) request_startup_state(self);
        // A commit not acknowledged for a whole tick: refused, or the request or its ack
        // was lost (a head that died). The keeper acknowledges a repeat of the same bytes.
        if (st.rounds->current_phase() == round_tracker::phase::committing &&
            st.commit.retry_due(st.now(), st.cfg.commit_retry)) {
          log_debug(fragment_name(st) + ": round " + std::to_string(st.rounds->committed_round()) +
                    " not acknowledged by every keeper; sending it again (try " +
                    std::to_string(st.commit.tries() + 1) + ")");
          send_commit(self);
        }
        if (st.has_membership) report_progress(self);
        self->delayed_send(self, st.cfg.commit_retry, tick_atom::value);
      },
  };
}

}  // namespace atl
