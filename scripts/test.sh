#!/usr/bin/env bash
# Runs every test: set up and build Collc, then ctest (GoogleTest suites and
# the lit suite). GPU tests skip cleanly without a device. The exhaustive
# sweeps carry the ctest label `exhaustive` and run only with
# COLL_EXHAUSTIVE=1.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

exclude=()
if [ "${COLL_EXHAUSTIVE:-0}" != "1" ]; then
  exclude=(-LE exhaustive)
fi
cd "$BUILD_DIR"
ctest --output-on-failure -j "$(nproc)" ${exclude[@]+"${exclude[@]}"}
