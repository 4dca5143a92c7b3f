// Protocol tier, seeded: envelopes that pass decode but are hostile to the handlers behind it
// (issue 67: one such envelope stopped the head). For every payload kind, a generator walks
// the schema and fills the payload as a hostile peer would: lists as long as decode's budgets
// allow, numbers at their extremes (an index of 2^32 - 1, NaN weights), enum values no schema
// names, text of random bytes, shared subtrees (one list pointed at from many fields). Each
// message goes to a real registry, coordinator and keeper, under an id that may speak to it.
// Every actor must stay up and answer afterwards; what its handler could not take is refused
// and counted (actors/shared/guarded_handler.hpp), never an exit.
//
//   ATOLL_HOSTILE_SEEDS=N   seeds to run (default 8); a failing seed replays with
//   ATOLL_HOSTILE_SEED=S    that seed alone
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include <capnp/dynamic.h>
#include <capnp/schema.h>
#include <gtest/gtest.h>
#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/coordinator/coordinator.hpp"
#include "actors/keeper/keeper.hpp"
#include "actors/registry/registry.hpp"
#include "runtime/core/actor_id.hpp"
#include "storage/checkpoint_store.hpp"
#include "storage/registry_store.hpp"
#include "tests/support/deterministic.hpp"
#include "tests/support/registry_testing.hpp"

namespace atl {
namespace {

using json = nlohmann::json;
using testing::recorder;

// Fills payloads from the schema, as a hostile peer would, within decode's budgets.
class hostile_payloads {
 public:
  explicit hostile_payloads(std::uint64_t seed) : rng_(seed) {}

  // One envelope of payload kind `field` (a member of Envelope's union), filled.
  void fill(wire::outgoing& out, capnp::StructSchema::Field field) {
    elements_left_ = wire::limits{}.max_list_elements;
    auto env = capnp::toDynamic(out.envelope);
    if (field.getType().isVoid()) {
      env.set(field, capnp::VOID);
      return;
    }
    fill_struct(env.init(field).as<capnp::DynamicStruct>(), 0);
  }

 private:
  std::uint64_t pick(std::initializer_list<std::uint64_t> choices) {
    auto it = choices.begin();
    std::advance(it, static_cast<long>(rng_() % choices.size()));
    return *it;
  }

  // A list's length: mostly short, sometimes as long as the message's element budget allows.
  unsigned length(bool pointer_elements) {
    const std::size_t most = pointer_elements ? elements_left_ : 20000;
    const std::size_t n = pick({0, 1, 2, 7, most / 2, most});
    if (pointer_elements) elements_left_ -= std::min(n, elements_left_);
    return static_cast<unsigned>(n);
  }

  std::string text() {
    const auto n = pick({0, 1, 12, 200, 4000});
    std::string s(n, ' ');
    for (auto& c : s) c = static_cast<char>(1 + rng_() % 255);  // any byte but the terminator
    if (rng_() % 3 == 0 && n > 8) s.replace(0, 7, "worker/");  // half of an id, so that id parsing is reached
    return s;
  }

  capnp::DynamicValue::Reader number(capnp::schema::Type::Which which) {
    using T = capnp::schema::Type;
    const auto big = pick({0, 1, 2, 3, 255, 65535, 0xffffffffu, std::numeric_limits<std::uint64_t>::max(), rng_()});
    switch (which) {
      case T::BOOL: return rng_() % 2 == 0;
      case T::INT8: return static_cast<std::int8_t>(big);
      case T::INT16: return static_cast<std::int16_t>(big);
      case T::INT32: return static_cast<std::int32_t>(big);
      case T::INT64: return static_cast<std::int64_t>(big);
      case T::UINT8: return static_cast<std::uint8_t>(big);
      case T::UINT16: return static_cast<std::uint16_t>(big);
      case T::UINT32: return static_cast<std::uint32_t>(big);
      case T::UINT64: return big;
      case T::FLOAT32:
      case T::FLOAT64: {
        const double values[] = {0.0, -1.0, 1e30, std::nan(""), std::numeric_limits<double>::infinity(), 0.5};
        return values[rng_() % 6];
      }
      default: return capnp::VOID;
    }
  }

  void fill_struct(capnp::DynamicStruct::Builder s, int depth) {
    for (auto field : s.getSchema().getNonUnionFields()) fill_field(s, field, depth);
    const auto members = s.getSchema().getUnionFields();
    if (members.size() > 0) fill_field(s, members[static_cast<unsigned>(rng_() % members.size())], depth);
  }

  void fill_field(capnp::DynamicStruct::Builder s, capnp::StructSchema::Field field, int depth) {
    using T = capnp::schema::Type;
    const auto type = field.getType();
    switch (type.which()) {
      case T::VOID: s.set(field, capnp::VOID); break;
      case T::TEXT: s.set(field, capnp::Text::Reader(text())); break;
      case T::DATA: {
        const auto t = text();
        s.set(field, capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(t.data()), t.size()));
        break;
      }
      case T::ENUM:
        s.set(field, capnp::DynamicEnum(type.asEnum(), static_cast<std::uint16_t>(pick({0, 1, 4, 999}))));
        break;
      case T::STRUCT:
        if (depth < 3) fill_struct(s.init(field).as<capnp::DynamicStruct>(), depth + 1);
        break;
      case T::LIST: fill_list(s, field, depth); break;
      case T::ANY_POINTER:
      case T::INTERFACE: break;
      default: s.set(field, number(type.which())); break;
    }
  }

  void fill_list(capnp::DynamicStruct::Builder s, capnp::StructSchema::Field field, int depth) {
    using T = capnp::schema::Type;
    const auto element = field.getType().asList().getElementType();
    const bool pointers = element.isText() || element.isData() || element.isStruct() || element.isList();
    const auto n = length(pointers);
    auto list = s.init(field, n).as<capnp::DynamicList>();
    if (element.isText()) {
      const auto shared = text();  // one text for many elements: what an amplifying peer repeats
      for (unsigned i = 0; i < n; ++i) list.set(i, capnp::Text::Reader(rng_() % 4 == 0 ? text() : shared));
    } else if (element.isStruct()) {
      for (unsigned i = 0; i < n && depth < 3; ++i) {
        auto item = list[i].as<capnp::DynamicStruct>();
        for (auto f : item.getSchema().getNonUnionFields())
          if (!f.getType().isList() || i < 8) fill_field(item, f, depth + 1);  // nested lists on a few
      }
    } else if (!element.isList() && !element.isData() && element.which() != T::ENUM) {
      for (unsigned i = 0; i < n; ++i) list.set(i, number(element.which()));
    }
  }

  std::mt19937_64 rng_;
  std::size_t elements_left_ = 0;
};

// A registry, a coordinator and a keeper, real, on CAF's deterministic scheduler; every
// other id is a recorder.
class HostileHandlers : public ::testing::Test {
 protected:
  HostileHandlers() : sys_(testing::deterministic(cfg_)), sched_(testing::test_scheduler(sys_)) {}

  void SetUp() override {
    run_config run;
    run.min_workers = 1;
    run.fragments = 2;
    run.heartbeat_ms = 250;
    run.lease_ms = 1000;
    registry_snapshot snap;
    snap.cluster_id = cluster_.get();
    snap.config_toml = to_toml(run);
    const auto probe = sys_.spawn(recorder, &seen_);
    for (const auto* id : {"node/1", "node/2", "worker/1.0", "worker/x", "keeper/1", "ctl/t", "coord/1"})
      dir_.add(id, probe);
    deps_ = testing::in_process_registry(net_, store_, checkpoints_, dir_, "inproc://hostile");
    deps_.lease_from_arrival = false;
    dir_.add(registry_id(), sys_.spawn(registry_actor, deps_, snap));
    dir_.add("keeper/0", sys_.spawn(keeper_actor, static_cast<transport*>(&net_), std::string("keeper/0"),
                                    cluster_.get(), &checkpoints_));
    coordinator_config cc;
    cc.min_workers = 1;
    dir_.add("coord/0", sys_.spawn(coordinator_actor, static_cast<transport*>(&net_), cluster_.get(), cc));
    sched_.run();
  }

  void TearDown() override {
    for (const auto& id : dir_.ids()) caf::anon_send_exit(dir_.find(id), caf::exit_reason::user_shutdown);
    dir_.clear();
    sched_.run();
    for (int i = 0; i < 200 && sched_.trigger_timeout(); ++i) sched_.run();
  }

  // Runs the jobs and a little simulated time (the actors' ticks run on the state left).
  void settle() {
    sched_.run();
    for (int i = 0; i < 3 && sched_.trigger_timeout(); ++i) sched_.run();
  }

  void send(const std::string& from, const std::string& to, wire::outgoing& out, std::uint64_t epoch) {
    mailer mail(net_, from, cluster_.get());
    mail.send(to, epoch, out);
  }

  // Each actor answers a plain request of its own kind after the hostile ones.
  void expect_every_actor_answers(std::uint64_t seed) {
    seen_.clear();
    wire::outgoing status;
    status.envelope.initControlRequest().setCommand("status");
    send("ctl/t", registry_id(), status, 0);
    wire::outgoing load;
    load.envelope.initLoadRequest().setFragment(0);
    send("coord/1", "keeper/0", load, 0);
    wire::outgoing state;
    state.envelope.initStateRequest().setFragment(0);
    send("worker/x", "coord/0", state, 0);
    settle();
    bool registry = false, keeper = false, coordinator = false;
    for (const auto& m : seen_) {
      registry |= m->sender() == registry_id() && m->receiver() == "ctl/t" && m->envelope().isControlReply();
      keeper |= m->sender() == "keeper/0" && m->receiver() == "coord/1";
      coordinator |= m->sender() == "coord/0" && m->receiver() == "worker/x";
    }
    EXPECT_TRUE(registry) << "seed " << seed << ": the registry did not answer status";
    EXPECT_TRUE(keeper) << "seed " << seed << ": the keeper did not answer a LoadRequest";
    EXPECT_TRUE(coordinator) << "seed " << seed << ": the coordinator did not answer a StateRequest";
  }

  caf::actor_system_config cfg_;
  caf::actor_system sys_;
  caf::scheduler::test_coordinator& sched_;
  cluster_identity cluster_{"cluster-hostile"};
  directory dir_;
  memory_transport net_{dir_, cluster_};
  std::unique_ptr<kv_store> registry_db_ = make_memory_store();
  std::unique_ptr<kv_store> checkpoint_db_ = make_memory_store();
  registry_store store_{*registry_db_};
  checkpoint_store checkpoints_{*checkpoint_db_, 10};
  registry_deps deps_;
  std::vector<wire::message_ptr> seen_;
};

std::vector<std::uint64_t> seeds() {
  if (const char* one = std::getenv("ATOLL_HOSTILE_SEED")) return {std::strtoull(one, nullptr, 10)};
  const char* count = std::getenv("ATOLL_HOSTILE_SEEDS");
  const std::uint64_t n = count ? std::strtoull(count, nullptr, 10) : 8;
  std::vector<std::uint64_t> out;
  for (std::uint64_t s = 1; s <= n; ++s) out.push_back(s);
  return out;
}

TEST_F(HostileHandlers, EveryKindFilledHostilelyLeavesTheRegistryCoordinatorAndKeeperUpAndAnswering) {
  // Who may speak to whom: each target hears every kind from ids of every role it knows.
  const std::vector<std::pair<std::string, std::vector<std::string>>> targets = {
      {registry_id(), {"node/1", "worker/1.0", "coord/0", "keeper/1", "ctl/t"}},
      {"coord/0", {"worker/x", "keeper/0", registry_id(), "worker/1.0"}},
      {"keeper/0", {"coord/1", "keeper/1", "worker/x", registry_id()}},
  };
  const auto kinds = capnp::Schema::from<schema::Envelope>().getUnionFields();
  std::size_t sent = 0, decoded = 0;
  for (const auto seed : seeds()) {
    hostile_payloads gen(seed);
    std::mt19937_64 epochs(seed);
    for (const auto& [to, senders] : targets)
      for (auto kind : kinds)
        for (const auto& from : senders) {
          wire::outgoing out;
          gen.fill(out, kind);
          const auto before = net_.counters().messages_in.load();
          send(from, to, out, epochs() % 4 == 0 ? std::numeric_limits<std::uint64_t>::max() : epochs() % 4);
          decoded += net_.counters().messages_in.load() - before;
          ++sent;
          settle();
        }
    expect_every_actor_answers(seed);
  }
  // Most reach a handler: the generator stays within decode's budgets.
  EXPECT_GT(decoded, sent / 2) << decoded << " of " << sent << " decoded";
  // Every one was judged by a handler's own checks: none threw into the guard (the guard is
  // the last line, not the way hostile input is handled).
  EXPECT_EQ(net_.counters().refused[static_cast<std::size_t>(errc::handler_failed)].load(), 0u);
  std::cout << "hostile envelopes: " << sent << " sent, " << decoded << " past decode to a handler, "
            << net_.counters().refused_total() << " refusals counted\n";
}

}  // namespace
}  // namespace atl
