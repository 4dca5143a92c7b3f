// The registry's reports: what workers and coordinators tell it goes into its views (the
// answers of atollctl) and the metrics file. A WorkerDone also changes who takes part.
#include "actors/registry/reports.hpp"

#include <nlohmann/json.hpp>

#include "actors/registry/cursor.hpp"
#include "actors/registry/lifecycle.hpp"
#include "actors/registry/phase.hpp"
#include "runtime/core/actor_id.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/log.hpp"

namespace atl::registry_detail {
namespace {

// What the worker holds now. Only a merged result counts as taking part; a state it
// adopted (a joiner, a resync) is its own kind of line in the metrics file.
void on_round_ack(registry_state& st, worker_view& w, const schema::RoundAck::Reader& ack) {
  if (ack.getFragment() >= st.fragments.size()) return;
  st.fragments[ack.getFragment()].worker_digests[w.id] = {ack.getRound(), ack.getDigest()};
  if (!ack.getAdopted()) w.rounds_acked++;
  nlohmann::json line = {{"fragment", ack.getFragment()},
                         {"round", ack.getRound()},
                         {"worker", w.id},
                         {"digest", digest_hex(ack.getDigest())}};
  if (ack.getSinceContributed() > 0) line["since_contributed_s"] = ack.getSinceContributed();
  st.metrics.write(ack.getAdopted() ? "adopted" : "ack", std::move(line));
}

void on_progress(registry_state& st, worker_view& w, const schema::Progress::Reader& p) {
  w.step = p.getStep();
  w.loss = p.getLoss();
  w.tokens_per_s = p.getTokensPerSec();
  w.bytes_sent = p.getBytesSent();
  w.bytes_received = p.getBytesReceived();
  w.wait_s = p.getWaitSeconds();
  w.threads = p.getThreadLayout();
  nlohmann::json line = {{"worker", w.id},
                         {"step", w.step},
                         {"loss", w.loss},
                         {"tokens_per_s", w.tokens_per_s},
                         {"bytes_sent", w.bytes_sent},
                         {"bytes_received", w.bytes_received},
                         {"wait_s", w.wait_s}};
  if (!w.threads.empty()) line["threads"] = w.threads;
  st.metrics.write("step", std::move(line));
}

void record_eval(registry_state& st, const std::string& worker, std::uint64_t step, float val_loss) {
  st.last_eval_step = static_cast<std::int64_t>(step);
  st.last_val_loss = val_loss;
  st.metrics.write("eval", {{"worker", worker}, {"step", step}, {"val_loss", val_loss}});
}

void on_worker_done(registry_state& st, worker_view& w, const schema::WorkerDone::Reader& d) {
  w.done = true;
  for (auto ack : d.getLastAcks()) {  // the same as its RoundAcks, unless a head that took over missed them
    if (ack.getFragment() >= st.fragments.size()) continue;
    auto& known = st.fragments[ack.getFragment()].worker_digests[w.id];
    if (ack.getRound() >= known.first) known = {ack.getRound(), ack.getDigest()};
  }
  w.step = d.getSteps();
  w.loss = d.getFinalLoss();
  w.tokens_per_s = d.getTokensPerSec();
  w.bytes_sent = d.getBytesSent();
  w.bytes_received = d.getBytesReceived();
  w.wall_s = d.getWallSeconds();
  w.wait_s = d.getWaitSeconds();
  if (d.getValLoss() >= 0) record_eval(st, w.id, d.getSteps(), d.getValLoss());
  st.metrics.write("worker_done", {{"worker", w.id},
                                   {"steps", w.step},
                                   {"loss", w.loss},
                                   {"tokens_per_s", w.tokens_per_s},
                                   {"bytes_sent", w.bytes_sent},
                                   {"bytes_received", w.bytes_received},
                                   {"wall_s", w.wall_s},
                                   {"wait_s", w.wait_s},
                                   {"compute_utilisation", w.wall_s > 0 ? 1.0 - w.wait_s / w.wall_s : 0.0}});
  log_info("registry: " + w.id + " finished " + std::to_string(w.step) + " steps");
}

// A committed round into the views, the duration histogram and the metrics file.
void record_round_report(self_ptr self, const wire::message& msg) {
  auto& st = self->state;
  const auto r = msg.envelope().getRoundReport();
  st.fragments[r.getFragment()].round = r.getRound();
  st.fragments[r.getFragment()].released_digest = std::make_pair(r.getRound(), r.getDigest());
  st.round_durations.observe(r.getDurationS());
  st.last_round_at = st.now();
  nlohmann::json names = nlohmann::json::array();
  for (auto p : r.getParticipants()) names.push_back(std::string(p.cStr()));
  nlohmann::json weights = nlohmann::json::array();
  for (auto w : r.getWeights()) weights.push_back(w);
  nlohmann::json late = nlohmann::json::object();
  // Each list read once: every getter call spends the list's words of the reader's budget.
  const auto late_workers = r.getLateWorkers();
  const auto late_weights = r.getLateWeights();
  for (unsigned i = 0; i < late_workers.size() && i < late_weights.size(); ++i)
    late[std::string(late_workers[i].cStr())] = late_weights[i];
  // With sharded rounds each slice of a fragment's round is a line of its own, with the same
  // workers and weights: `slice` and `shards` say which, so that a reader counts a round's
  // samples once (the stragglers bench counted them once a slice, issue 68).
  const auto shards = static_cast<std::uint32_t>(shards_of(st.cfg));
  st.metrics.write("round", {{"fragment", r.getFragment()},
                             {"slice", r.getFragment() % shards},
                             {"shards", shards},
                             {"round", r.getRound()},
                             {"epoch", r.getEpoch()},
                             {"participants", names.size()},
                             {"workers", names},
                             {"weights", weights},
                             {"late", late},
                             {"duration_s", r.getDurationS()},
                             {"since_last_contribution_s", r.getSinceLastContributionS()},
                             {"bytes", r.getBytes()},
                             {"digest", digest_hex(r.getDigest())}});
}

}  // namespace

void on_worker_report(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto env = msg->envelope();
  auto it = st.workers.find(msg->sender());
  if (it == st.workers.end()) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, msg->sender() + " is not a registered worker"), st.snap.epoch);
    return;
  }
  auto& w = it->second;
  if (env.isRoundAck()) {
    on_round_ack(st, w, env.getRoundAck());
    mark_synced_if_all_acked(self, w.node_id);
  } else if (env.isProgress()) {
    on_progress(st, w, env.getProgress());
  } else if (env.isEvalReport()) {
    const auto e = env.getEvalReport();
    record_eval(st, w.id, e.getStep(), e.getValLoss());
    log_info("registry: step " + std::to_string(e.getStep()) + " held-out loss " + std::to_string(e.getValLoss()));
  } else if (env.isWorkerDone()) {
    if (w.done) return;  // sent again after a reconnect: known already
    on_worker_done(st, w, env.getWorkerDone());
    persist(self);  // a restarted head must not wait for it either
    publish_membership(self);  // no round waits for it, and the quorum may shrink
    update_run_phase(self);
  }
}

void on_round_report(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto r = msg->envelope().getRoundReport();
  if (r.getFragment() >= st.fragments.size() || msg->sender() != coordinator_id(r.getFragment())) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "round report from " + msg->sender()), st.snap.epoch);
    return;
  }
  auto& f = st.fragments[r.getFragment()];
  const bool again = f.released_digest && f.released_digest->first >= r.getRound();  // its ack was lost
  if (!again) record_round_report(self, *msg);
  std::vector<std::string> taken, late;
  for (auto p : r.getParticipants()) taken.emplace_back(p.cStr());
  for (auto p : r.getLateWorkers()) late.emplace_back(p.cStr());
  // Acknowledged once its data is saved: until then the coordinator sends it again.
  if (!data_committed(self, *msg, taken, late)) return;
  wire::outgoing out;
  auto ack = out.envelope.initRoundReportAck();
  ack.setFragment(r.getFragment());
  ack.setRound(r.getRound());
  st.mail->send(msg->sender(), st.snap.epoch, out);
  update_run_phase(self);  // the summary may have been waiting for this round
}

void on_round_progress(self_ptr self, const wire::message_ptr& msg) {
  auto& st = self->state;
  const auto r = msg->envelope().getRoundProgress();
  if (r.getFragment() >= st.fragments.size() || msg->sender() != coordinator_id(r.getFragment())) {
    st.mail->refuse(*msg, make_error(errc::unknown_peer, "round progress from " + msg->sender()), st.snap.epoch);
    return;
  }
  auto names = [](auto list) {
    std::vector<std::string> out;
    for (auto n : list) out.emplace_back(n.cStr());
    return out;
  };
  round_progress p;
  p.round = r.getRound();
  p.phase = r.getPhase().cStr();
  p.participants = names(r.getParticipants());
  p.contributors = names(r.getContributors());
  p.keepers = names(r.getKeepers());
  // A coordinator from before the counts sends whole lists and no counts.
  p.participant_count = std::max<std::size_t>(r.getParticipantCount(), p.participants.size());
  p.contributor_count = std::max<std::size_t>(r.getContributorCount(), p.contributors.size());
  p.acked = names(r.getAcked());
  p.phase_for_s = r.getPhaseForS();
  p.open_for_s = r.getOpenForS();
  auto& f = st.fragments[r.getFragment()];
  f.progress = std::move(p);
  f.progress_at = st.now();
  check_membership_held(self, r.getFragment(), r.getMembershipEpoch(), r.getMembershipDigest());
}

}  // namespace atl::registry_detail
