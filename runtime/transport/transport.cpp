#include "runtime/transport/transport.hpp"

#include <caf/send.hpp>

#include "runtime/process/log.hpp"

namespace atl {

void directory::add(const std::string& id, caf::actor handle) {
  std::lock_guard<std::mutex> lock(mu_);
  actors_[id] = std::move(handle);
}

void directory::remove(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  actors_.erase(id);
}

caf::actor directory::find(const std::string& id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = actors_.find(id);
  return it == actors_.end() ? caf::actor{} : it->second;
}

std::vector<std::string> directory::ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, _] : actors_) out.push_back(id);
  return out;
}

void directory::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  actors_.clear();
}

std::uint64_t traffic_counters::refused_total() const {
  std::uint64_t total = 0;
  for (const auto& c : refused) total += c.load();
  return total;
}

status deliver_local(wire::frames&& frames, const wire::limits& lim, const cluster_identity& cluster,
                     const directory& dir, traffic_counters& counters, wire::message_ptr* delivered) {
  auto decoded = wire::decode(std::move(frames), lim);
  if (!decoded) {
    counters.count_refusal(decoded.err().code);
    return decoded.err();
  }
  const auto& msg = **decoded;
  if (auto st = wire::check_cluster(msg, cluster.get())) {
    counters.count_refusal(st.code);
    return st;
  }
  auto target = dir.find(msg.receiver());
  if (!target) {
    counters.count_refusal(errc::unknown_peer);
    return make_error(errc::unknown_peer, "no actor '" + msg.receiver() + "' here");
  }
  counters.messages_in++;
  counters.bytes_in += msg.wire_bytes();
  if (delivered) *delivered = *decoded;
  caf::anon_send(target, *decoded);
  return {};
}

void memory_transport::send(const std::string& receiver, wire::frames frames) {
  counters_->messages_out++;
  if (auto st = deliver_local(std::move(frames), limits_, cluster_, dir_, *counters_))
    log_debug("memory transport: refused a message for " + receiver + ": " + st.describe());
}

std::size_t mailer::send(const std::string& receiver, std::uint64_t epoch, wire::outgoing& msg) {
  if (silenced_) return 0;
  msg.envelope.setClusterId(cluster_);
  msg.envelope.setSender(self_);
  msg.envelope.setReceiver(receiver);
  msg.envelope.setEpoch(epoch);
  msg.envelope.setSeq(++seq_);
  auto frames = wire::encode(msg);
  std::size_t size = 0;
  for (const auto& f : frames) size += f.size();
  bytes_sent_ += size;
  if (!transport_->delivers_in_process(receiver)) {
    auto& counters = transport_->counters();
    const auto slot = traffic_counters::kind_slot(msg.envelope.which());
    counters.kind_bytes_out[slot] += size;
    traffic_counters::note_largest(counters.kind_largest_envelope_out[slot], frames[0].size());
  }
  transport_->send(receiver, std::move(frames));
  return size;
}

void mailer::refuse(const wire::message& msg, const error& err, std::uint64_t epoch) {
  wire::outgoing out;
  auto r = out.envelope.initRefusal();
  r.setCode(static_cast<std::uint16_t>(err.code));
  r.setMessage(err.message);
  r.setRefusedSeq(msg.seq());
  transport_->counters().count_refusal(err.code);
  send(msg.sender(), epoch, out);
}

}  // namespace atl
