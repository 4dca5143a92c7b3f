#pragma once
// Moving envelopes between actors. Actors never touch sockets: they hand encoded frames
// to a transport, and the receiving side decodes them at its ingress (wire::decode) and
// delivers a wire::message_ptr to the addressed CAF actor through a directory.
//
//   actor --mailer.send--> transport --frames--> [network] --> ingress --> directory --> actor
//
// Two transports exist: zmq_transport (real processes, runtime/transport/zmq_transport.hpp) and
// memory_transport (one process, for protocol tests); both run the same ingress.
#include <array>
#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include <caf/actor.hpp>
#include <caf/allowed_unsafe_message_type.hpp>

#include "runtime/transport/wire.hpp"

// Validated messages are shared, immutable, and never leave the process as CAF messages.
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(atl::wire::message_ptr)

namespace atl {

// Actor ids living in this process. Thread-safe.
class directory {
 public:
  void add(const std::string& id, caf::actor handle);
  void remove(const std::string& id);
  caf::actor find(const std::string& id) const;  // invalid handle if absent
  bool contains(const std::string& id) const { return static_cast<bool>(find(id)); }
  std::vector<std::string> ids() const;
  // Drops every handle. Call before the actor system is destroyed: CAF waits for the
  // threads of detached actors until their last strong reference is gone.
  void clear();

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, caf::actor> actors_;
};

// The cluster id this process fences on; empty until learned (nodes learn it at Welcome).
class cluster_identity {
 public:
  explicit cluster_identity(std::string id = {}) : id_(std::move(id)) {}
  std::string get() const {
    std::lock_guard<std::mutex> lock(mu_);
    return id_;
  }
  void set(std::string id) {
    std::lock_guard<std::mutex> lock(mu_);
    id_ = std::move(id);
  }

 private:
  mutable std::mutex mu_;
  std::string id_;
};

// Ingress and egress counts of one process; refusals per error code.
struct traffic_counters {
  std::atomic<std::uint64_t> messages_in{0}, messages_out{0}, bytes_in{0}, bytes_out{0}, unroutable{0};
  // Of bytes_in and bytes_out, the tensor frames (those behind the envelope): what says
  // whether tensors cross this process's link, whatever carries the control around them.
  std::atomic<std::uint64_t> tensor_bytes_in{0}, tensor_bytes_out{0};
  // Server: bytes passed from one connection to another (counted once, also in bytes_out).
  std::atomic<std::uint64_t> bytes_relayed{0}, tensor_bytes_relayed{0};
  // CURVE: clients the ZAP handler admitted or denied, and failed handshakes (wrong key,
  // no security, garbage before the handshake).
  std::atomic<std::uint64_t> auth_admitted{0}, auth_denied{0}, handshakes_failed{0};
  // Client: TCP connections made to the head. More than one means the link dropped and
  // came back (a restarted head): messages in flight then may be lost.
  std::atomic<std::uint64_t> connections{0};
  // Per payload kind (schema::Envelope::Which), the bytes of the messages that came in over
  // this process's link and that its actors handed to the link (in-process deliveries and
  // relayed bytes apart): what a head's link is made of, and what grows with what.
  static constexpr std::size_t kinds = 64;  // room for every payload kind
  std::array<std::atomic<std::uint64_t>, kinds> kind_bytes_in{}, kind_bytes_out{};
  static std::size_t kind_slot(unsigned kind) { return kind % kinds; }
  // Per payload kind, the largest envelope frame (the Cap'n Proto part, tensors apart) that
  // came in and that went out over the link: how close each kind comes to
  // wire::limits::max_envelope_bytes (docs/design.md, "Message sizes").
  std::array<std::atomic<std::uint64_t>, kinds> kind_largest_envelope_in{}, kind_largest_envelope_out{};
  static void note_largest(std::atomic<std::uint64_t>& largest, std::uint64_t size) {
    auto seen = largest.load();
    while (size > seen && !largest.compare_exchange_weak(seen, size)) {}
  }
  static constexpr std::size_t reasons = 32;  // room for every errc code
  std::array<std::atomic<std::uint64_t>, reasons> refused{};
  void count_refusal(errc code) { refused[static_cast<std::size_t>(code) % refused.size()]++; }
  std::uint64_t refused_total() const;
};

// Runs the ingress checks and delivers to a local actor. Returns the refusal, if any.
status deliver_local(wire::frames&& frames, const wire::limits& lim, const cluster_identity& cluster,
                     const directory& dir, traffic_counters& counters, wire::message_ptr* delivered = nullptr);

class transport {
 public:
  virtual ~transport() = default;
  // Not copyable: counters_ may point into this object.
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;
  // Thread-safe. Sends frames to the actor `receiver`, wherever it lives. Never blocks on
  // the network; undeliverable messages are counted and dropped (the protocols time out).
  virtual void send(const std::string& receiver, wire::frames frames) = 0;
  // This process's counters: ingress refusals, and refusals its actors send (mailer).
  traffic_counters& counters() { return *counters_; }
  // The peer that speaks for `id` is gone (a node that left or died): ids it held may
  // move to another connection at once. Thread-safe; a no-op for in-process transports.
  virtual void forget_peer(const std::string& id) { (void)id; }
  // Whether `id` lives in this process (send hands it over without a socket). Thread-safe.
  virtual bool delivers_in_process(const std::string& id) const = 0;

 protected:
  // A transport that is part of another (runtime/transport/node_links.hpp) counts into the owner's.
  explicit transport(traffic_counters* shared = nullptr) : counters_(shared ? shared : &own_counters_) {}
  traffic_counters own_counters_;
  traffic_counters* counters_;
};

// All actors in one process; every message still goes through encode and ingress.
class memory_transport : public transport {
 public:
  memory_transport(directory& dir, cluster_identity& cluster, wire::limits lim = {})
      : dir_(dir), cluster_(cluster), limits_(lim) {}
  void send(const std::string& receiver, wire::frames frames) override;
  bool delivers_in_process(const std::string& id) const override { return dir_.contains(id); }

 private:
  directory& dir_;
  cluster_identity& cluster_;
  wire::limits limits_;
};

// The sending side of one actor: stamps the header (cluster, sender, receiver, epoch,
// sequence), encodes, counts bytes. Owned by the actor; not thread-safe.
class mailer {
 public:
  mailer(transport& t, std::string self_id, std::string cluster_id)
      : transport_(&t), self_(std::move(self_id)), cluster_(std::move(cluster_id)) {}

  // Returns the bytes handed to the transport.
  std::size_t send(const std::string& receiver, std::uint64_t epoch, wire::outgoing& msg);
  // Replies to `msg` with a typed Refusal and counts it in the transport's counters.
  void refuse(const wire::message& msg, const error& err, std::uint64_t epoch);
  // Counts a refusal without answering (a Refusal is never answered with another).
  void count_refusal(errc code) { transport_->counters().count_refusal(code); }

  const std::string& self() const { return self_; }
  void set_self(std::string id) { self_ = std::move(id); }
  void set_cluster(std::string id) { cluster_ = std::move(id); }
  const std::string& cluster() const { return cluster_; }
  std::uint64_t bytes_sent() const { return bytes_sent_; }
  std::uint64_t last_seq() const { return seq_; }  // of the last message sent (a Refusal names it)
  bool delivers_in_process(const std::string& receiver) const { return transport_->delivers_in_process(receiver); }
  // Sends nothing from now on: an actor that lost its authority (a deposed head's
  // registry) must not say what it could not make durable, even later in the same handler.
  void silence() { silenced_ = true; }

 private:
  transport* transport_;
  std::string self_;
  std::string cluster_;
  std::uint64_t seq_ = 0;
  std::uint64_t bytes_sent_ = 0;
  bool silenced_ = false;
};

}  // namespace atl
