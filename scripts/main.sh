#!/usr/bin/env bash
# The main job: set up and build Collc, then run the compiler on the standard
# ring allreduce and show what it found.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

echo "== collc $COLL_ROOT/stdlib/ring_allreduce.coll --emit=summary"
"$BUILD_DIR/tools/collc/collc" "$COLL_ROOT/stdlib/ring_allreduce.coll" --emit=summary
