#!/usr/bin/env bash
# Layering guard: runtime/, storage/ and actors/ never include LibTorch (torch, ATen, c10),
# so everything but examples/ and tools/ builds and tests without it.
# Usage: tools/check/layering.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
hits=$(grep -rnE '^\s*#\s*include\s*[<"](torch|ATen|c10)/' runtime storage actors || true)
if [ -n "$hits" ]; then
  echo "LibTorch included below examples/ (workers train through actors/replica.hpp):" >&2
  echo "$hits" >&2
  exit 1
fi
echo "layering ok: no LibTorch include in runtime/, storage/, actors/"
