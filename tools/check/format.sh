#!/usr/bin/env bash
# Format guard: every C++ file git tracks is as clang-format (with the committed
# .clang-format) writes it. Exits 77 (a skipped test) where clang-format is not installed.
# Fix with: clang-format -i $(git ls-files '*.cpp' '*.hpp' '*.cu')
# Usage: tools/check/format.sh [SOURCE_DIR]
set -euo pipefail
cd "${1:-$(dirname "${BASH_SOURCE[0]}")/../..}"
if ! command -v clang-format >/dev/null; then
  echo "clang-format is not installed: format not checked" >&2
  exit 77
fi
if [ -d .git ] || git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cpp' '*.hpp' '*.cu')
else
  mapfile -t files < <(find actors runtime storage node tools tests examples python -name '*.cpp' -o -name '*.hpp' -o -name '*.cu')
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  echo "not formatted (clang-format -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format ok: ${#files[@]} files"
