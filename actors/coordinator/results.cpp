// What a committed round sends: its report to the registry, its results to the
// contributors (whole, provisional while the keepers write it, or a confirmation), the
// committed state to a worker that asks for it, and the round's progress to the registry
// every tick (`atollctl explain`).
#include "actors/coordinator/results.hpp"

#include <algorithm>
#include <unordered_set>

#include <caf/all.hpp>

#include "actors/coordinator/commit.hpp"
#include "actors/decisions/round_explain.hpp"
#include "actors/shared/data_pieces.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/fault_point.hpp"
#include "runtime/process/log.hpp"

namespace atl::coordinator_detail {
namespace {

void send_report(coordinator_state& st, const coordinator_state::round_report& r) {
  wire::outgoing out;
  auto report = out.envelope.initRoundReport();
  report.setFragment(st.cfg.fragment);
  report.setRound(r.round);
  report.setEpoch(r.epoch);
  report.setDigest(r.digest);
  auto names = report.initParticipants(static_cast<unsigned>(r.participants.size()));
  for (unsigned i = 0; i < r.participants.size(); ++i) names.set(i, r.participants[i]);
  auto weights = report.initWeights(static_cast<unsigned>(r.weights.size()));
  for (unsigned i = 0; i < r.weights.size(); ++i) weights.set(i, r.weights[i]);
  auto late = report.initLateWorkers(static_cast<unsigned>(r.late.size()));
  for (unsigned i = 0; i < r.late.size(); ++i) late.set(i, r.late[i]);
  auto late_weights = report.initLateWeights(static_cast<unsigned>(r.late_weights.size()));
  for (unsigned i = 0; i < r.late_weights.size(); ++i) late_weights.set(i, r.late_weights[i]);
  report.setDurationS(r.duration_s);
  report.setSinceLastContributionS(r.since_last_contribution_s);
  report.setBytes(r.bytes);
  auto ties = report.initTies(static_cast<unsigned>(r.ties.size()));
  for (unsigned i = 0; i < r.ties.size(); ++i) {
    ties[i].setWorker(r.ties[i].worker);
    ties[i].setRound(r.ties[i].round);
    put_data_pieces(ties[i].initPieces(static_cast<unsigned>(r.ties[i].pieces.size())), r.ties[i].pieces);
  }
  st.mail->send(st.cfg.registry, st.epoch(), out);
}

// One report at a time, the oldest unacknowledged: the registry applies a fragment's
// rounds in order (a report it has applied, sent again, is only acknowledged).
void send_oldest_report(coordinator_state& st) {
  if (st.unacked_reports.empty()) return;
  send_report(st, st.unacked_reports.front());
  st.reports_sent = st.now();
}

// Reports kept for the registry's acknowledgement at most: a head down for longer than
// this many rounds loses the oldest (their data stays in flight at the head, never
// learned twice; the log says so).
constexpr std::size_t max_unacked_reports = 1024;

// The data pieces of each input the releasing round took (round_tracker::inputs), from the
// contributions as they came.
std::vector<coordinator_state::round_report::tie> ties_of_inputs(const coordinator_state& st) {
  std::vector<coordinator_state::round_report::tie> ties;
  for (const auto& [name, weight] : st.released_inputs) {
    auto it = st.round_inputs.find(name);
    if (it == st.round_inputs.end()) continue;
    const auto c = it->second->envelope().getContribution();
    if (c.getData().size() == 0) continue;
    const bool late = round_tracker::is_late_name(name);
    ties.push_back(
        {late ? round_tracker::worker_of_late_name(name) : name, c.getRound(), read_data_pieces(c.getData())});
  }
  return ties;
}

// The committed round, to the registry (its views, the metrics file and the data cursor);
// kept until acknowledged (coordinator_state::unacked_reports).
void report_round(self_ptr self, const std::vector<std::string>& contributors, std::uint64_t digest) {
  auto& st = self->state;
  coordinator_state::round_report r;
  r.round = st.rounds->committed_round();
  r.epoch = st.rounds->open_epoch();
  r.digest = digest;
  r.participants = contributors;
  // Every input as averaged (round_tracker::inputs): participants in order, late ones apart.
  for (const auto& [name, weight] : st.released_inputs) {
    if (!round_tracker::is_late_name(name)) {
      r.weights.push_back(weight);
      continue;
    }
    r.late.push_back(round_tracker::worker_of_late_name(name));
    r.late_weights.push_back(weight);
  }
  r.duration_s = static_cast<float>(std::chrono::duration<double>(st.now() - st.collect->round_started()).count());
  r.since_last_contribution_s =
      static_cast<float>(std::chrono::duration<double>(st.now() - st.collect->last_contribution()).count());
  r.bytes = st.round_bytes;
  r.ties = ties_of_inputs(st);
  if (!st.cfg.reports_carry_data) st.unacked_reports.clear();  // only the latest matters (views, metrics)
  st.unacked_reports.push_back(std::move(r));
  if (st.unacked_reports.size() > max_unacked_reports) {
    log_warn(fragment_name(st) + ": round " + std::to_string(st.unacked_reports.front().round) +
             "'s report was never acknowledged by the registry; no longer kept");
    st.unacked_reports.pop_front();
    send_oldest_report(st);
  } else if (st.unacked_reports.size() == 1) {
    send_oldest_report(st);
  }
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

}  // namespace

void resend_round_report(self_ptr self) { send_oldest_report(self->state); }

void resend_round_report_if_due(self_ptr self) {
  auto& st = self->state;
  if (st.cfg.reports_carry_data && !st.unacked_reports.empty() && st.now() - st.reports_sent >= report_resend_after)
    send_oldest_report(st);
}

void on_round_report_ack(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (msg->sender() != st.cfg.registry) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "round_report_ack from " + msg->sender()), st.epoch());
    return;
  }
  const auto acked = msg->envelope().getRoundReportAck().getRound();
  if (st.unacked_reports.empty() || st.unacked_reports.front().round > acked) return;  // an ack sent twice
  while (!st.unacked_reports.empty() && st.unacked_reports.front().round <= acked) st.unacked_reports.pop_front();
  send_oldest_report(st);
}

// Donors a FragmentState names at most (each is asked in turn, 2 s of silence each).
constexpr std::size_t max_donors = 4;

namespace {

// The released round's encoded change of theta as frames, or none: results carry theta.
// Made once with the commit's (a result record is the same frames).
std::optional<round_update_frames> released_update_frames(coordinator_state& st) {
  const auto* u = st.rounds->released_update();
  if (!u) return std::nullopt;
  auto& c = frames_to_commit(st);
  if (!c.update) c.update = make_round_update_frames(encoded_values(*u));
  return c.update;
}

}  // namespace

// The committed state of the fragment: inline, or a header naming the keepers the worker
// fetches it from in chunks (every keeper has the committed round) for a large fragment or
// one whose bytes the worker holds already (`held_digest`: it then fetches nothing).
void send_state(self_ptr self, const std::string& worker, std::uint64_t held_digest) {
  auto& st = self->state;
  const auto& theta = st.rounds->theta();
  const auto digest = digest64(theta.data(), theta.size() * sizeof(float));
  wire::outgoing out;
  auto fs = out.envelope.initFragmentState();
  fs.setFragment(st.cfg.fragment);
  fs.setRound(st.rounds->committed_round());
  if (theta.size() <= st.cfg.state_chunk_values && held_digest != digest) {
    out.tensors.push_back(wire::tensor::from_floats(theta.data(), theta.size()));
  } else {
    fs.setCount(theta.size());
    fs.setDigest(digest);
    const auto& every = st.commit.keepers();
    auto keepers = fs.initKeepers(static_cast<unsigned>(every.size()));
    for (unsigned i = 0; i < every.size(); ++i) keepers.set(i, every[i]);
  }
  // The fragment's other members: a joiner may take its inner-optimizer state from one.
  std::vector<std::string> donors;
  for (const auto& m : st.collect->members())
    if (m != worker && donors.size() < max_donors) donors.push_back(m);
  auto listed = fs.initDonors(static_cast<unsigned>(donors.size()));
  for (unsigned i = 0; i < donors.size(); ++i) listed.set(i, donors[i]);
  st.mail->send(worker, st.rounds->open_epoch(), out);
}

void send_missed_result(self_ptr self, const std::string& worker) {
  auto& st = self->state;
  const auto& theta = st.rounds->theta();
  const auto frame = wire::tensor::from_floats_hashed(theta.data(), theta.size());
  send_results(st, {worker}, st.rounds->committed_round(), st.rounds->open_epoch(), *frame.checksum, &frame,
               std::nullopt, result_form::whole);
}

// Early results: once every keeper has the whole CommitRequest (its `writing` notice), a
// DiLoCo round's result goes to its contributors while the keepers write it, so that the
// results travel during the keepers' write, fdatasync and acknowledgement instead of after
// them, and do not slow the commit's own bytes; release() then only confirms it. Nobody
// applies a round before every keeper has it on disk (S4).
void send_provisional_results(self_ptr self) {
  auto& st = self->state;
  const auto update = released_update_frames(st);
  send_results(st, st.rounds->contributors(), st.rounds->committed_round(), st.epoch(),
               frames_to_commit(st).theta_digest, update ? nullptr : &committing_theta(st), update,
               result_form::provisional);
  ATL_FAULT_POINT("coordinator.provisional");
}

released_round report_release(self_ptr self, const std::vector<std::string>& contributors, bool provisional) {
  auto& st = self->state;
  const auto& result = st.rounds->result();
  released_round r;
  r.contributors = contributors;
  r.round = st.rounds->committed_round();
  // Low-bit results: the round's encoded change, which every contributor adds to its copy
  // of the previous theta_global (round_tracker.hpp); else theta_global itself. A committed
  // DiLoCo round's theta_global is what its commit carried: those frames and their digest
  // serve again (a ddp average was never committed). A result that went out provisional
  // is only confirmed.
  r.confirm = provisional;
  r.update = released_update_frames(st);
  if (st.rounds->rule() == round_tracker::update_rule::nesterov) {
    r.digest = frames_to_commit(st).theta_digest;
    if (!r.update) r.theta = committing_theta(st);
  } else {
    r.theta = wire::tensor::from_floats_hashed(result.data(), result.size());
    r.digest = *r.theta->checksum;
  }
  st.commit_frames.reset();  // the messages hold what they share
  // The registry hears of the round before any worker can: a worker's WorkerDone after its
  // last result must not reach the registry before the round that result belongs to.
  report_round(self, contributors, r.digest);
  return r;
}

void send_released(self_ptr self, const released_round& r) {
  auto& st = self->state;
  const auto form = r.confirm ? result_form::confirmation : result_form::whole;
  send_results(st, r.contributors, r.round, st.rounds->open_epoch(), r.digest, r.theta ? &*r.theta : nullptr,
               r.confirm ? std::nullopt : r.update, form);
}

namespace {

template <class List, class Names>
void fill_names(List list, const Names& names) {
  unsigned i = 0;
  for (const auto& n : names) list.set(i++, n);
}

}  // namespace

// Where the round is, to the registry every tick (RoundProgress; `atollctl explain`).
void report_progress(self_ptr self) {
  auto& st = self->state;
  const auto phase = st.rounds->current_phase();
  const auto contributors = st.rounds->contributors();
  const bool collecting = phase == round_tracker::phase::collecting;
  const bool committing = st.commit.committing();
  const auto round = committing ? st.rounds->committed_round() : st.rounds->open_round();
  const auto key = std::string(to_string(phase)) + "/" + std::to_string(round) + "/" +
                   std::to_string(contributors.size()) + "/" + std::to_string(st.commit.acknowledged().size());
  if (key != st.progress_key) {
    st.progress_key = key;
    st.progress_since = st.now();
  }
  if (key == st.progress_sent_key && st.now() - st.progress_sent < st.cfg.progress_keepalive) return;
  st.progress_sent_key = key;
  st.progress_sent = st.now();
  wire::outgoing out;
  auto p = out.envelope.initRoundProgress();
  p.setFragment(st.cfg.fragment);
  p.setRound(round);
  p.setPhase(to_string(phase));
  if (collecting) {
    // Bounded whatever the round's size (docs/design.md, "Message sizes"): the participants
    // still awaited and the contributors, at most progress_names of each, with the counts.
    const std::unordered_set<std::string> contributed(contributors.begin(), contributors.end());
    std::vector<std::string> awaited;
    for (const auto& w : st.rounds->participants()) {
      if (awaited.size() == progress_names) break;
      if (!contributed.count(w)) awaited.push_back(w);
    }
    const std::vector<std::string> named(contributors.begin(),
                                         contributors.begin() + std::min(contributors.size(), progress_names));
    fill_names(p.initParticipants(static_cast<unsigned>(awaited.size())), awaited);
    fill_names(p.initContributors(static_cast<unsigned>(named.size())), named);
    p.setParticipantCount(static_cast<std::uint32_t>(st.rounds->participants().size()));
    p.setContributorCount(static_cast<std::uint32_t>(contributors.size()));
    if (!contributors.empty())
      p.setOpenForS(static_cast<float>(std::chrono::duration<double>(st.now() - st.collect->round_started()).count()));
  }
  if (committing) {
    fill_names(p.initKeepers(static_cast<unsigned>(st.commit.keepers().size())), st.commit.keepers());
    fill_names(p.initAcked(static_cast<unsigned>(st.commit.acknowledged().size())), st.commit.acknowledged());
  }
  p.setPhaseForS(static_cast<float>(std::chrono::duration<double>(st.now() - st.progress_since).count()));
  p.setMembershipEpoch(st.membership.view().epoch);
  p.setMembershipDigest(st.membership.digest());
  st.mail->send(st.cfg.registry, st.epoch(), out);
}

}  // namespace atl::coordinator_detail
