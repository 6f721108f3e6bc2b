#!/usr/bin/env bash
# Builds Collc with AddressSanitizer and UndefinedBehaviorSanitizer (CUDA
# off) in its own build directory and runs every test there.
set -euo pipefail
COLL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export BUILD_DIR="${SANITIZE_BUILD_DIR:-$COLL_ROOT/build-sanitize}"
export BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}"
export CMAKE_ARGS="-DCOLL_SANITIZE=ON -DCOLL_ENABLE_CUDA=OFF"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export LSAN_OPTIONS="${LSAN_OPTIONS:-suppressions=$COLL_ROOT/scripts/lsan.supp}"
source "$COLL_ROOT/scripts/setup.sh"
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" -LE exhaustive
