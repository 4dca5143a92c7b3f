// The commit of a round to its keepers (actors/coordinator/commit.hpp).
#include "actors/coordinator/commit.hpp"

#include <caf/all.hpp>

#include "actors/shared/commit_record.hpp"
#include "actors/shared/pseudo_gradient.hpp"
#include "runtime/core/digest.hpp"
#include "runtime/process/log.hpp"

namespace atl::coordinator_detail {
namespace {

// The committing round's record when it logs what it averaged (fp32 results, or a rule
// that does not follow its result): the contributions as received and in the order they
// were averaged in (worker id), or its fp32 average when that is fewer bytes.
round_record inputs_record(const coordinator_state& st, std::uint64_t theta_digest) {
  round_record r;
  r.fragment = st.cfg.fragment;
  r.round = st.rounds->committed_round();
  r.epoch = st.epoch();
  r.count = st.rounds->theta().size();
  r.theta_digest = theta_digest;
  r.rule = st.rounds->rule_of_rounds();
  std::uint64_t bytes = 0;
  for (const auto& [name, weight] : st.rounds->inputs()) {  // a late input under its late name
    const auto& msg = *st.round_inputs.at(name);
    const auto c = msg.envelope().getContribution();
    round_input in;
    in.worker = name;
    in.weight = weight;  // as averaged: a late input's is discounted
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
    r.form = record_form::average;
  }
  return r;
}

// The record's frames. Contributions go out as the frames they arrived in, whose checksums
// the transport checked on receipt: hashing them again would be one more pass over every
// input on the commit's path. Only the average is a new frame.
std::vector<wire::tensor> frames_of_inputs_record(const coordinator_state& st, const round_record& record) {
  if (record.form == record_form::average) return record_tensors(record);
  std::vector<wire::tensor> out;
  for (const auto& in : record.inputs)
    for (const auto& t : st.round_inputs.at(in.worker)->tensors()) out.push_back(t);
  return out;
}

// theta, momentum and (unless the state follows the result: then the residual is the
// coordinator's own, outer_round.hpp) the residual when there is one.
std::vector<wire::tensor> full_state_frames(const coordinator_state& st, const wire::tensor& theta) {
  const auto& momentum = st.rounds->momentum();
  const auto& residual = st.rounds->residual();
  std::vector<wire::tensor> out = {theta, wire::tensor::from_floats_hashed(momentum.data(), momentum.size())};
  if (!residual.empty() && !st.rounds->rule_of_rounds().state_follows_result)
    out.push_back(wire::tensor::from_floats(residual.data(), residual.size()));
  return out;
}

}  // namespace

coordinator_state::committing_frames& frames_to_commit(coordinator_state& st) {
  const auto round = st.rounds->committed_round();
  if (!st.commit_frames || st.commit_frames->round != round) {
    const auto& theta = st.rounds->theta();
    const auto& rule = st.rounds->rule_of_rounds();
    coordinator_state::committing_frames c;
    c.round = round;
    const bool follows = rule.state_follows_result && rule.result_codec != codec_kind::fp32;
    if (round == 0 || (follows && !st.rounds->released_update())) {
      // The seed; or a round that published theta itself (a change that was not finite),
      // which no record replays: every keeper gets its full state.
      c.theta = wire::tensor::from_floats_hashed(theta.data(), theta.size());
      c.theta_digest = *c.theta->checksum;
      c.tensors = full_state_frames(st, *c.theta);
    } else if (follows) {
      // The record is the change the contributors receive: the same frames, hashed once,
      // their bytes shared with the record rather than copied.
      c.theta_digest = digest64(theta.data(), theta.size() * sizeof(float));
      c.update = make_round_update_frames(encoded_values(*st.rounds->released_update()));
      const auto& frames = c.update->tensors;
      c.record = result_record(st.cfg.fragment, round, st.epoch(), c.theta_digest, rule, c.update->count,
                               frames[0].data, frames.size() > 1 ? frames[1].data : byte_buffer());
      c.tensors = frames;
    } else {
      c.theta_digest = digest64(theta.data(), theta.size() * sizeof(float));
      c.record = inputs_record(st, c.theta_digest);
      c.tensors = frames_of_inputs_record(st, *c.record);
    }
    for (const auto& t : c.tensors) c.bytes += t.data.size();
    st.commit_frames = std::move(c);
  }
  return *st.commit_frames;
}

const wire::tensor& committing_theta(coordinator_state& st) {
  auto& c = frames_to_commit(st);
  if (!c.theta) c.theta = wire::tensor::from_floats_hashed(st.rounds->theta().data(), st.rounds->theta().size());
  return *c.theta;
}

namespace {

// The committing round's full state as frames (full_state_frames), made once: for keepers
// that cannot follow its record.
const std::vector<wire::tensor>& committing_full_state(coordinator_state& st) {
  auto& c = frames_to_commit(st);
  if (c.full_state.empty()) c.full_state = full_state_frames(st, committing_theta(st));
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
  st.mail->send(keeper, st.epoch(), out);
}

}  // namespace

void send_commit(coordinator_state& st, const std::vector<std::string>& keepers) {
  for (const auto& keeper : keepers) send_commit_to(st, keeper);
}

round_commit::effects start_commit(coordinator_state& st) {
  const auto round = st.rounds->committed_round();
  // A DiLoCo round past the seed may send its result while the keepers write it.
  const bool early = st.cfg.early_results && round > 0 && st.rounds->rule() == round_tracker::update_rule::nesterov;
  const auto bytes = frames_to_commit(st).bytes;
  // What crosses a link: the averaging bench counts each node's keeper bytes from this line.
  std::size_t local = 0;
  for (const auto& k : st.commit.keepers()) local += st.mail->delivers_in_process(k) ? 1 : 0;
  log_debug(fragment_name(st) + ": committing round " + std::to_string(round) + ", " +
            std::to_string(std::chrono::duration<double>(st.now() - st.collect->last_contribution()).count()) +
            " s after the last contribution arrived (" + std::to_string(bytes) + " bytes to " +
            std::to_string(st.commit.keepers().size()) + " keepers, " + std::to_string(local) + " in this process)");
  return st.commit.start(round, bytes, early, st.now());
}

round_commit::effects on_commit_ack(coordinator_state& st, const wire::message& msg) {
  const auto ack = msg.envelope().getCommitAck();
  using answer = round_commit::answer;
  const auto what = ack.getWriting()  ? answer::writing
                    : ack.getOk()     ? answer::acknowledged
                    : ack.getBehind() ? answer::behind
                                      : answer::refused;
  const bool this_round = st.commit.committing() && ack.getRound() == st.commit.round();
  auto effects = st.commit.on_answer(msg.sender(), ack.getRound(), what);
  if (!this_round) return effects;  // a duplicate or late ack: the round was already settled
  const auto round = std::to_string(ack.getRound());
  if (what == answer::behind && !effects.send_to.empty()) {
    log_info(fragment_name(st) + ": " + msg.sender() + " lacks round " + std::to_string(ack.getRound() - 1) +
             "; sending it round " + round + "'s full state");
  } else if (what == answer::refused) {  // sent again when a retry is due
    log_error(fragment_name(st) + ": " + msg.sender() + " refused round " + round + ": " + ack.getError().cStr() +
              "; retrying");
  } else if (what == answer::acknowledged) {
    log_debug(fragment_name(st) + ": " + msg.sender() + " acknowledged round " + round + " (" +
              std::to_string(st.commit.tries()) + " tries; " +
              std::to_string(std::chrono::duration<double>(st.now() - st.commit.last_sent()).count()) +
              " s after the last)");
  }
  return effects;
}

}  // namespace atl::coordinator_detail
