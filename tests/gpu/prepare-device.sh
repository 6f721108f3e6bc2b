#!/usr/bin/env bash
# Prepares what tests/gpu/run-on-device.sh needs on a machine without the
# compiler: the GPU test plans and the one-rank plans of the NCCL library's
# PyTorch run (compiled with collc here), GoogleTest's sources, and collc
# itself for the PyTorch backend's plans, in .device/ (ignored by git).
#
#   tests/gpu/prepare-device.sh [COLLC]     (default: build/tools/collc/collc)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
collc=${1:-$root/build/tools/collc/collc}
bash "$root/tests/gpu/make-plans.sh" "$collc" "$root/.device/plans"
bash "$root/tests/nccl-shim/make-one-rank-plans.sh" "$collc" "$root/.device/shim"
if [ -f /usr/src/googletest/CMakeLists.txt ]; then
  rm -rf "$root/.device/googletest"
  cp -r /usr/src/googletest "$root/.device/googletest"
fi
# The compiler, for the PyTorch backend's plans there: stripped, with the
# ANTLR runtime it loads.
mkdir -p "$root/.device/tools"
cp "$collc" "$root/.device/tools/collc"
strip "$root/.device/tools/collc" 2>/dev/null || true
antlr=$(ldd "$collc" | awk '/libantlr4-runtime/ {print $3}')
[ -n "$antlr" ] && cp "$antlr" "$root/.device/tools/"
du -sh "$root/.device"
