#!/usr/bin/env bash
# Layering guard:
# - runtime/, storage/ and actors/ never include LibTorch (torch, ATen, c10), so everything
#   but examples/ and tools/ builds and tests without it;
# - the pure decisions (the state machines the actors are shells over, and the outer step)
#   include no CAF and no transport, and never read the clock themselves
#   (steady_clock::now()): time is passed in, so table tests and the protocol tier's
#   simulated clock decide them.
# Usage: tools/check/layering.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
hits=$(grep -rnE '^\s*#\s*include\s*[<"](torch|ATen|c10)/' runtime storage actors || true)
if [ -n "$hits" ]; then
  echo "LibTorch included below examples/ (workers train through actors/replica.hpp):" >&2
  echo "$hits" >&2
  exit 1
fi
decisions=(
  actors/quorum actors/membership actors/placement actors/fragment_sync actors/state_fetch
  actors/round_tracker actors/round_explain actors/restart_budget actors/commit_barrier actors/held_requests
  runtime/algorithm/outer_optimizer runtime/algorithm/outer_round runtime/algorithm/codec
  storage/round_record
)
files=()
for d in "${decisions[@]}"; do
  for ext in hpp cpp; do [ -f "$d.$ext" ] && files+=("$d.$ext"); done
done
hits=$(grep -nE '^\s*#\s*include\s*[<"](caf/|actors/messages\.hpp|runtime/transport\.hpp|runtime/zmq_transport\.hpp)|steady_clock::now\(' "${files[@]}" || true)
if [ -n "$hits" ]; then
  echo "a pure decision includes CAF or a transport, or reads the clock itself:" >&2
  echo "$hits" >&2
  exit 1
fi
echo "layering ok: no LibTorch include in runtime/, storage/, actors/; ${#files[@]} decision files free of CAF, transports and clocks"
