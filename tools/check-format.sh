#!/usr/bin/env bash
# Checks (or with --fix, applies) .clang-format on every C/C++/CUDA source in the repository.
# CI runs the check; it needs Debian's clang-format.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.cu' '*.cuh' | grep -v '^subprojects/')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
if ! clang-format --dry-run --Werror "${files[@]}"; then
  echo "check-format: the files above differ from .clang-format; run tools/check-format.sh --fix" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files follow .clang-format"
