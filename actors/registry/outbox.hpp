#pragma once
// The registry's outputs, the bottom of its files (actors/registry/registry.hpp draws them):
// the snapshot persisted, and what the nodes and coordinators are sent (Membership, route
// tables, placements, Shutdown). Nothing here decides: the files above call these after
// a decision changed the state, and these call nothing above them.
#include <chrono>
#include <cstdint>
#include <string>

#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>

#include "actors/registry/state.hpp"
#include "actors/shared/membership_delta.hpp"
#include "runtime/transport/route_delta.hpp"

namespace atl::registry_detail {

using self_ptr = caf::stateful_actor<registry_state>*;

// The snapshot from the state, synced to RocksDB: before anyone hears of a change. False
// when the store refused it (logged; a fenced store also stops the registry).
bool persist(self_ptr self);

// The Membership as the coordinators are to hold it: the workers with steps left (a
// finished one never contributes again), sorted; the quorum; the keepers of a commit.
membership_view membership_of(registry_state& st);
void send_membership(self_ptr self, const std::string& to, const membership_delta& d);
// The Membership to every placed coordinator: at once, or within route_publish_gap of the
// last one with the changes since (send_membership_now, when it is due).
void publish_membership(self_ptr self);
void send_membership_now(self_ptr self);

// Shutdown(reason) to node/N; to every node that takes part.
void send_shutdown(self_ptr self, std::uint32_t node, const std::string& reason);
void stop_every_node(self_ptr self, const std::string& reason);
inline constexpr const char* run_finished_reason = "run finished";

// PlaceCoordinator to the host of every coordinator not yet confirmed, and PlaceKeeper to
// the host of every replica keeper, repeated each tick until it says it runs there (and, to
// a hand-over's incoming replica, until it has caught up: a repeat asks if it is ready).
void send_placements(self_ptr self);
void send_keeper_placement(self_ptr self);
// DropKeeper to the host of each replica in `dropping`, a few ticks over (drop_sends).
inline constexpr int drop_sends = 5;
void send_keeper_drops(self_ptr self);

// Changes closer together than this go to the nodes as one delta (placements excepted).
constexpr std::chrono::milliseconds route_publish_gap{100};
route_table routes_of(const registry_state& st);
void publish_routes(self_ptr self);
void send_routes_to_nodes(self_ptr self, route_table table);  // what publish_routes holds back, now
void send_whole_routes(self_ptr self, std::uint32_t node);  // the table last published
// A heartbeat said node `node` holds the table of `epoch` with `digest`: a version check
// if that is not the one published (the node then asks for the whole table), else nothing.
void check_routes_held(self_ptr self, std::uint32_t node, std::uint64_t epoch, std::uint64_t digest);
// The same for the Membership: coordinator `unit`'s RoundProgress said it holds the one of
// `epoch` with `digest`; a version check if that is not the one published (it then asks for
// the whole), else nothing.
void check_membership_held(self_ptr self, std::uint32_t unit, std::uint64_t epoch, std::uint64_t digest);

}  // namespace atl::registry_detail
