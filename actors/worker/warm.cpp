// A worker's warm start, both sides (actors/decisions/warm_start.hpp has the joiner's state machine).
//
// Joiner: once every fragment's committed state is adopted, and before its first step, it
// asks the donors the coordinators named (FragmentState.donors: the fragment's other
// members) for their inner-optimizer state: InnerStateRequest(snapshot 0) to the first,
// then the snapshot's chunks, each reply checked, the whole against the digest. It installs
// the moments and AdamW's step count and starts training; if no donor can give them (none
// live, none trained yet, a user's own loop, silence for 2 s each), it starts with fresh
// state and says why.
//
// Donor: InnerStateRequest(snapshot 0) takes a snapshot between two of its steps (so the
// moments and the step count belong together) and answers with its header and first
// chunk; later requests name the snapshot. It keeps the snapshot until the joiner has its
// last chunk or a new one is asked for.
#include "actors/worker/warm.hpp"

#include <algorithm>

#include "runtime/core/digest.hpp"
#include "runtime/process/log.hpp"

namespace atl {

namespace {

// Values an InnerStateReply carries at most (16 MiB), whatever the request asks.
constexpr std::uint64_t max_reply_values = 1 << 22;

void ask_donor(worker_self self) {
  auto& st = self->state;
  const auto req = st.warm->next_request();
  wire::outgoing out;
  auto r = out.envelope.initInnerStateRequest();
  r.setSnapshot(req.snapshot);
  r.setOffset(req.offset);
  r.setCount(req.count);
  st.mail->send(req.donor, st.epoch, out);
  st.warm_asked_at = st.now();
}

// The warm start is over: the caller returns true, and the shell resumes the worker.
void finish_warm(worker_self self) {
  auto& st = self->state;
  st.warm.reset();
  st.warm_tried = true;
}

void log_cold(const worker_state& st) {
  log_warn(st.cfg.id + ": starting at step " + std::to_string(st.step) +
           " with fresh inner-optimizer state: " + st.warm->last_failure());
}

void start_cold(worker_self self) {
  log_cold(self->state);
  finish_warm(self);
}

// The moments are here: installed, then read back, so that the log's digest is the one
// the replica holds (a donor logs the digest of what it lent).
void start_warm_with(worker_self self) {
  auto& st = self->state;
  auto values = st.warm->take_values();
  const auto adam_step = st.warm->adam_step();
  st.model->write_inner_state(values.data(), adam_step);
  const auto held_step = st.model->read_inner_state(values.data());
  const auto held = digest64(values.data(), values.size() * sizeof(float));
  log_info(st.cfg.id + ": starting at step " + std::to_string(st.step) + " warm: inner-optimizer state of " +
           std::to_string(values.size()) + " values at AdamW step " + std::to_string(held_step) + " from " +
           st.warm->donor() + ", digest " + digest_hex(held) +
           (held == st.warm->digest() ? "" : " (the donor's was " + digest_hex(st.warm->digest()) + ")"));
  finish_warm(self);
}

}  // namespace

bool start_warm(worker_self self) {
  auto& st = self->state;
  if (!st.cfg.run.warm_start) {
    log_info(st.cfg.id + ": starting at step " + std::to_string(st.step) +
             " with fresh inner-optimizer state (inner.warm_start = false)");
    st.warm_tried = true;
    return false;
  }
  st.warm.emplace(st.model->inner_state_size(), static_cast<std::uint64_t>(st.cfg.run.state_chunk_values));
  if (st.warm->begin(st.donors, st.cfg.id) == warm_start::outcome::cold) {  // the caller starts it
    log_cold(st);
    st.warm.reset();
    st.warm_tried = true;
    return false;
  }
  ask_donor(self);
  return true;
}

bool on_inner_state_reply(worker_self self, const wire::message_ptr& msg) {
  auto& st = self->state;
  if (!st.warm) return false;  // late: the joiner has started
  const auto env = msg->envelope().getInnerStateReply();
  warm_start::reply r{msg->sender(),  env.getSnapshot(), env.getFound(), env.getAdamStep(),
                      env.getCount(), env.getDigest(),   env.getOffset()};
  std::vector<float> values;
  if (r.found && msg->tensors().size() == 1 && msg->tensors()[0].dtype == schema::DType::FLOAT32)
    values = msg->tensors()[0].to_floats();
  const auto was = st.warm->donor();
  switch (st.warm->on_reply(r, values)) {
    case warm_start::outcome::ignored: return false;
    case warm_start::outcome::more:
      if (st.warm->donor() != was) log_warn(st.cfg.id + ": warm start: " + st.warm->last_failure());
      ask_donor(self);
      return false;
    case warm_start::outcome::warm: start_warm_with(self); return true;
    case warm_start::outcome::cold: start_cold(self); return true;
  }
  return false;
}

bool warm_tick(worker_self self, std::chrono::steady_clock::duration patience) {
  auto& st = self->state;
  if (!st.warm || st.now() - st.warm_asked_at < patience) return false;
  if (st.warm->on_timeout() == warm_start::outcome::cold) {
    start_cold(self);
    return true;
  }
  log_warn(st.cfg.id + ": warm start: " + st.warm->last_failure());
  ask_donor(self);
  return false;
}

void lend_inner_state(worker_self self, const wire::message& msg) {
  auto& st = self->state;
  const auto req = msg.envelope().getInnerStateRequest();
  if (req.getSnapshot() == 0) {  // a new snapshot, at this step boundary
    st.lent.reset();
    std::vector<float> values(st.model->inner_state_size());
    const auto adam_step = values.empty() ? 0 : st.model->read_inner_state(values.data());
    if (adam_step > 0) {  // a worker that has not stepped yet has nothing worth lending
      const auto digest = digest64(values.data(), values.size() * sizeof(float));
      st.lent = worker_state::lent_snapshot{++st.snapshots_lent, adam_step, digest, std::move(values)};
      log_info(st.cfg.id + ": lending its inner-optimizer state to " + msg.sender() + ": " +
               std::to_string(st.lent->values.size()) + " values at AdamW step " + std::to_string(adam_step) +
               ", digest " + digest_hex(digest));
    }
  }
  const auto offset = req.getOffset();
  const bool found = st.lent && (req.getSnapshot() == 0 || req.getSnapshot() == st.lent->id) &&
                     offset < st.lent->values.size() && req.getCount() > 0;
  wire::outgoing out;
  bool last_chunk = false;
  auto reply = out.envelope.initInnerStateReply();
  reply.setOffset(offset);
  reply.setFound(found);
  if (found) {
    const auto& lent = *st.lent;
    reply.setSnapshot(lent.id);
    reply.setAdamStep(lent.adam_step);
    reply.setCount(lent.values.size());
    reply.setDigest(lent.digest);
    const auto n = std::min({req.getCount(), max_reply_values, lent.values.size() - offset});
    out.tensors.push_back(wire::tensor::from_floats(lent.values.data() + offset, n));
    last_chunk = offset + n == lent.values.size();
  }
  st.mail->send(msg.sender(), st.epoch, out);
  if (last_chunk) st.lent.reset();  // the joiner has it all (or asks a new snapshot, or the next donor)
}

}  // namespace atl
