#!/usr/bin/env bash
# Layering guard:
# - runtime/, storage/ and actors/ never include LibTorch (torch, ATen, c10), so everything
#   but examples/ and tools/ builds and tests without it;
# - the pure decisions (the state machines the actors are shells over, and the outer step)
#   include no CAF, ZeroMQ, RocksDB or Cap'n Proto, none of our headers outside the pure
#   libraries, and never read the clock themselves (steady_clock::now()): time is passed
#   in, so table tests and the protocol tier's simulated clock decide them.
# Usage: tools/check/layering.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
hits=$(grep -rnE '^\s*#\s*include\s*[<"](torch|ATen|c10)/' runtime storage actors || true)
if [ -n "$hits" ]; then
  echo "LibTorch included below examples/ (workers train through actors/replica.hpp):" >&2
  echo "$hits" >&2
  exit 1
fi
# The pure parts are the sources of atoll_core (runtime/CMakeLists.txt) and atoll_decisions
# (actors/CMakeLists.txt), read from the build files so the two lists cannot drift, plus the
# round record's codec (storage/round_record, pure but built with the store).
sources_of() {  # sources_of DIR TARGET: DIR/x.cpp for each source in add_library(TARGET ...)
  sed -n "/^add_library($2 /,/)/p" "$1/CMakeLists.txt" | grep -oE '[A-Za-z0-9_/]+\.cpp' | sed "s|^|$1/|"
}
units=$(sources_of runtime atoll_core; sources_of actors atoll_decisions; echo storage/round_record.cpp)
if [ "$(echo "$units" | wc -l)" -lt 10 ]; then
  echo "could not read the pure libraries' sources from runtime/ and actors/CMakeLists.txt" >&2
  exit 1
fi
files=()
for unit in $units; do
  base=${unit%.cpp}
  for ext in hpp cpp; do [ -f "$base.$ext" ] && files+=("$base.$ext"); done
done
hits=$(grep -nE '^\s*#\s*include\s*<(caf|zmq|rocksdb|capnp|kj)[/.]|steady_clock::now\(' "${files[@]}" || true)
if [ -n "$hits" ]; then
  echo "a pure decision includes CAF, ZeroMQ, RocksDB or Cap'n Proto, or reads the clock itself:" >&2
  echo "$hits" >&2
  exit 1
fi
# Of our own headers, a pure file includes only other pure files and these header-only ones.
header_only=(runtime/expected.hpp runtime/byte_buffer.hpp runtime/algorithm/codec_scalar.hpp
  runtime/algorithm/fragment_schedule.hpp runtime/algorithm/parallel_ranges.hpp storage/binary_fields.hpp)
allowed=" ${files[*]} ${header_only[*]} "
bad=""
for f in "${files[@]}"; do
  for inc in $(sed -nE 's/^\s*#\s*include\s*"([^"]+)".*/\1/p' "$f"); do
    case "$allowed" in *" $inc "*) ;; *) bad+="$f includes $inc"$'\n' ;; esac
  done
done
if [ -n "$bad" ]; then
  echo "a pure decision includes a header outside atoll_core / atoll_decisions:" >&2
  printf '%s' "$bad" >&2
  exit 1
fi
echo "layering ok: no LibTorch include in runtime/, storage/, actors/; ${#files[@]} decision files free of CAF, transports, impure headers and clocks"
