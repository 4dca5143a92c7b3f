#pragma once
// Node agent actor ("node/N"): one per machine. Registers with the registry, spawns one
// worker per device and supervises them.
//
//   registering --Welcome--> running --every worker finished--> done (quits normally)
//   running, hosting a keeper replica --every worker finished--> stays running (serving the
//            keeper) until the Shutdown the registry sends when the run finishes
//   registering: Hello every heartbeat interval until a Welcome (the head may start later)
//   running: the link to the head came back (a restarted head) -> workers resend what they
//            wait on (messages in flight through the old head are lost)
//   running: Heartbeat every cluster.heartbeat_ms; a worker that fails is restarted after
//            restart_backoff_ms * 2^k (k: its restarts in the window), at most
//            cluster.restart_limit times within cluster.restart_window_ms; one more failure
//            escalates: the node gives up (quits with an error: the process exits non-zero)
//   running --PlaceCoordinator(p)--> hosts coord/p (until the node stops or registers again)
//   running --PlaceKeeper(k, source)--> hosts keeper replica k on RocksDB under its data
//            dir, catching up from source (refused without a data dir)
//   running --PeerTable--> the node's links send tensors straight to the hosts it names; a
//            delta it cannot apply (one was lost) --> PeerTableRequest, for the whole table
//   running --Refusal(stale_epoch) from the registry--> stops its actors, registering again
//            (it was declared dead: SIGSTOP, a partition)
//   any --a registry message of an epoch below the highest it has seen (a deposed head)-->
//            refused with stale_epoch, nothing done
//   running, hosting a keeper replica --SIGTERM--> LeaveRequest to the registry, which hands
//            the replica over and then sends Shutdown (or, after cluster.handover_ms, stops)
//   running --PlaceKeeper(k) again, k hosted--> keeper k reports KeeperReady once caught up
//   running --DropKeeper(k), k hosted--> keeper k stops (placed elsewhere; its store stays);
//            not hosted: nothing (the registry sends it a few times)
//   any --Shutdown or SIGTERM--> Goodbye to the registry, local actors stopped, quits normally
// CAF 0.17 has no supervisor: this actor monitors its workers and installs its own down
// handler (without one CAF drops down messages).
#include <caf/stateful_actor.hpp>

#include "actors/node/state.hpp"

namespace atl {

caf::behavior node_agent_actor(caf::stateful_actor<node_agent_state>* self, transport* net, directory* local,
                               cluster_identity* cluster, node_agent_config cfg);

}  // namespace atl
