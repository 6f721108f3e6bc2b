#!/usr/bin/env bash
# Prepares what tests/gpu/run-on-device.sh needs on a machine without the
# compiler: the GPU test plans and the one-rank plans of the NCCL library's
# PyTorch run (compiled with collc here), and GoogleTest's sources, in
# .device/ (ignored by git).
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
du -sh "$root/.device"
