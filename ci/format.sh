#!/usr/bin/env bash
# clang-format over the project's C and C++ sources (.clang-format). --check lists the files
# that differ and fails if any does; without it, formats them in place.
# Usage: ci/format.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format.sh: clang-format not installed (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files '*.c' '*.cc' '*.h')
if [ "${1:-}" = --check ]; then
  bad=0
  for f in "${files[@]}"; do
    if ! clang-format --dry-run -Werror "$f" >/dev/null 2>&1; then
      echo "format.sh: $f differs from .clang-format (ci/format.sh fixes it)"
      bad=1
    fi
  done
  [ $bad = 0 ] && echo "format.sh: ${#files[@]} files as .clang-format says"
  exit $bad
fi
clang-format -i "${files[@]}"
