#pragma once
// Timer and control atoms of actors inside one process (never on the wire). Everything
// between actors is a Cap'n Proto envelope (schema/envelope.capnp) arriving as
// wire::message_ptr, even when both actors share a process.
#include <caf/atom.hpp>

namespace atl {

using tick_atom = caf::atom_constant<caf::atom("tick")>;  // periodic timer
using step_atom = caf::atom_constant<caf::atom("step")>;  // worker: run one inner step
using stop_atom = caf::atom_constant<caf::atom("stop")>;  // finish and quit
using restart_atom = caf::atom_constant<caf::atom("restart")>;  // node agent: respawn a worker
using confirm_atom = caf::atom_constant<caf::atom("confirm")>;  // coordinator: ask the registry again
using view_atom = caf::atom_constant<caf::atom("view")>;  // registry: a control command, in process
using resend_atom = caf::atom_constant<caf::atom("resend")>;  // worker: the link dropped; resend
using follow_atom = caf::atom_constant<caf::atom("follow")>;  // keeper: apply the records it acknowledged
using renew_atom = caf::atom_constant<caf::atom("renew")>;  // lease proxy: its node heartbeat
using suspect_atom = caf::atom_constant<caf::atom("suspect")>;  // lease proxy: its node's connection closed
using link_lost_atom = caf::atom_constant<caf::atom("linklost")>;  // registry: a node's connection closed
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;  // keeper: its snapshot is written
using ready_atom = caf::atom_constant<caf::atom("ready")>;  // replica keeper: report KeeperReady
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;  // coordinator: a round's deadline
using grace_atom = caf::atom_constant<caf::atom("grace")>;  // coordinator: a round's adaptive grace ends
using threads_atom = caf::atom_constant<caf::atom("threads")>;  // node agent: the layout a worker's trial kept
using done_atom = caf::atom_constant<caf::atom("done")>;  // node agent: a worker's final report
using routes_atom = caf::atom_constant<caf::atom("routes")>;  // registry: send the coalesced route changes
using members_atom = caf::atom_constant<caf::atom("members")>;  // registry: send the coalesced Membership
using admit_atom = caf::atom_constant<caf::atom("admit")>;  // registry: admit the new nodes that said Hello

}  // namespace atl
