#!/usr/bin/env bash
# Fails when a C++ or CUDA source differs from the repository's .clang-format.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
files=$(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [ -z "$files" ]; then
  exit 0
fi
# shellcheck disable=SC2086
clang-format --dry-run -Werror $files
echo "format: $(echo "$files" | wc -l) files clean"
