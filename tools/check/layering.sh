#!/usr/bin/env bash
# Layering guard: the folders are the architecture (docs/design.md §2), and this checks that
# every include of our own headers points sideways within a folder or down the drawing:
#
#   head                                 the head's process (a library tools/atoll runs)
#   node                                 a node's process and how a process lives (signals, CAF)
#   training                             the LibTorch side: tasks, the replica, token data
#   actors/node                          the node agent, above the roles it spawns
#   actors/{coordinator,keeper,registry,worker}   the roles: none includes another
#   actors/shared                        the messages and payloads every role speaks
#   actors/decisions                     pure decisions
#   storage                              durable state
#   runtime/{process,transport,etcd,device}   the runtime (schema/ for the wire)
#   runtime/{core,algorithm}             pure core
#
# Also:
# - runtime/, storage/ and actors/ never include LibTorch (torch, ATen, c10), so everything
#   but training/, head/, node/, python/ and tools/ builds and tests without it;
# - the pure parts (runtime/core, runtime/algorithm, actors/decisions, and the round record's
#   codec in storage/round_record, pure but built with the store) include no CAF, ZeroMQ,
#   RocksDB or Cap'n Proto, none of our headers outside the pure parts, and never read the
#   clock themselves (steady_clock::now()): time is passed in, so table tests and the
#   protocol tier's simulated clock decide them.
# Usage: tools/check/layering.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
hits=$(grep -rnE '^\s*#\s*include\s*[<"](torch|ATen|c10)/' runtime storage actors || true)
if [ -n "$hits" ]; then
  echo "LibTorch included below training/ (workers train through actors/worker/replica.hpp):" >&2
  echo "$hits" >&2
  exit 1
fi

pure="runtime/core runtime/algorithm actors/decisions"
runtime_parts="runtime/process runtime/transport runtime/etcd runtime/device"
roles="actors/coordinator actors/keeper actors/registry actors/worker"
# The folders a folder's files may include from (besides its own).
may_include() {
  case "$1" in
    runtime/core | runtime/algorithm) echo "$pure storage/binary_fields.hpp" ;;
    actors/decisions) echo "runtime/core runtime/algorithm" ;;
    runtime/*) echo "runtime schema" ;;
    storage) echo "runtime" ;;
    actors/shared) echo "runtime storage actors/decisions" ;;
    actors/node) echo "runtime storage actors/decisions actors/shared $roles" ;;
    actors/*) echo "runtime storage actors/decisions actors/shared" ;;
    training) echo "runtime storage actors" ;;
    node) echo "runtime storage actors training" ;;
    head) echo "runtime storage actors training node" ;;
    *) return 1 ;;
  esac
}
folders="$pure $runtime_parts storage actors/shared $roles actors/node training node head"
bad=""
checked=0
for folder in $folders; do
  [ -d "$folder" ] || { echo "layering.sh: no folder $folder (update the drawing above)" >&2; exit 1; }
  allowed="$folder $(may_include "$folder")"
  for f in $(find "$folder" -maxdepth 1 -name '*.hpp' -o -maxdepth 1 -name '*.cpp' -o -maxdepth 1 -name '*.cu'); do
    checked=$((checked + 1))
    for inc in $(sed -nE 's/^\s*#\s*include\s*"([^"]+)".*/\1/p' "$f"); do
      ok=""
      for a in $allowed; do
        case "$inc" in "$a" | "$a"/*) ok=1 ;; esac
      done
      [ -n "$ok" ] || bad+="$f includes $inc"$'\n'
    done
  done
done
# A folder nobody placed in the drawing is a folder this check does not guard.
for folder in $(find runtime actors -mindepth 1 -maxdepth 1 -type d | sort); do
  case " $folders " in *" $folder "*) ;; *) bad+="$folder is in no layer of tools/check/layering.sh"$'\n' ;; esac
done
if [ -n "$bad" ]; then
  echo "an include points up or across the layers (docs/design.md §2):" >&2
  printf '%s' "$bad" >&2
  exit 1
fi

# Inside a role the files are layered too (the drawings at the top of coordinator.hpp,
# registry.hpp and worker.hpp in their folders; the keeper's and the node agent's shells over
# the files beside them, over their state.hpp), top down: a file includes headers of its
# own unit (stems joined by ':', such as an interface and the files that implement it) and
# of the layers below, never one beside it, so that no handler calls another handler's
# file and nothing below calls up.
registry_layers=(
  "registry"  # the shell: dispatch
  "control nodes reports data"  # handlers of messages and timers
  "lifecycle"  # a node's lifecycle applied
  "phase"  # the run's phase applied
  "placements"  # placements applied
  "cursor"  # the data cursor applied
  "outbox"  # persist, publish, send
  "state:queries:views:dashboard_view:data_view:prometheus_text:lease_proxy"  # what it knows, read
)
worker_layers=(
  "worker"  # the shell: dispatch, ticks, results and refusals, resuming
  "diloco ddp"  # how it steps
  "state_intake warm data"  # committed state, a warm start and the data feed coming in
  "steps"  # sends, reports, waits, the end
  "state:strategy:done:replica:sliced_replica:data_feed"  # what it holds, and how it steps
)
coordinator_layers=(
  "coordinator"  # the shell: each message to its machine, the effects run
  "startup"  # the requests a start needs
  "results"  # results, state, reports, progress sent
  "commit"  # a round's commit to its keepers
  "base"  # the actor pointer, the log name
  "state"  # configuration and state
)
keeper_layers=(
  "keeper"  # the shell: each message handled, the store read and written
  "follow"  # the followed copies, applied, and their snapshots
  "state:keeper_messages"  # what it holds; the payloads it builds
)
node_layers=(
  "node_agent"  # the shell: registering, heartbeats, placements, the routes
  "node_workers"  # the node's workers spawned, watched, restarted
  "node_messages"  # the payloads it sends
  "state:placed_actors:node_config"  # what it holds, what was placed here, its configuration
)
# check_layers FOLDER LAYER...: the includes of FOLDER's files against its layers.
check_layers() {
  local folder=$1 f stem inc mine to i
  shift
  local layers=("$@")
  unit_of() {  # the layer index and unit of a stem, as "INDEX UNIT", or nothing
    local j u
    for j in "${!layers[@]}"; do
      for u in ${layers[$j]}; do
        case ":$u:" in *":$1:"*) echo "$j $u"; return ;; esac
      done
    done
  }
  for f in "$folder"/*.hpp "$folder"/*.cpp; do
    stem=$(basename "${f%.*}")
    mine=$(unit_of "$stem")
    [ -n "$mine" ] || { bad+="$f is in no layer of $folder (tools/check/layering.sh)"$'\n'; continue; }
    for inc in $(sed -nE "s|^\\s*#\\s*include\\s*\"$folder/([^\"]+)\\.hpp\".*|\\1|p" "$f"); do
      to=$(unit_of "$inc")
      i=${to%% *}
      if [ -n "$to" ] && { [ "${to#* }" = "${mine#* }" ] || [ "$i" -gt "${mine%% *}" ]; }; then continue; fi
      bad+="$f includes $folder/$inc.hpp, beside or above it in the layers of $folder"$'\n'
    done
  done
}
check_layers actors/registry "${registry_layers[@]}"
check_layers actors/worker "${worker_layers[@]}"
check_layers actors/coordinator "${coordinator_layers[@]}"
check_layers actors/keeper "${keeper_layers[@]}"
check_layers actors/node "${node_layers[@]}"
if [ -n "$bad" ]; then
  echo "an include inside a role points up or across its layers:" >&2
  printf '%s' "$bad" >&2
  exit 1
fi

pure_files=$(find $pure -name '*.hpp' -o -name '*.cpp'; echo storage/round_record.hpp storage/round_record.cpp)
# shellcheck disable=SC2086
hits=$(grep -nE '^\s*#\s*include\s*<(caf|zmq|rocksdb|capnp|kj)[/.]|steady_clock::now\(' $pure_files || true)
if [ -n "$hits" ]; then
  echo "a pure decision includes CAF, ZeroMQ, RocksDB or Cap'n Proto, or reads the clock itself:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "layering ok: $checked files include only sideways or down, the coordinator's, the registry's, the worker's, the keeper's and the node agent's by their layers; no LibTorch in runtime/, storage/, actors/;" \
  "$(echo "$pure_files" | wc -w) pure files free of CAF, transports and clocks"
