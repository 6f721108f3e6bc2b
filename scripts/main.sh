#!/usr/bin/env bash
# The main job: set up and build Collc, then compile the standard ring
# allreduce for 8 ranks (what the front end found, what verification proved,
# a summary of the plan), run the plan with 8 ranks as threads and check
# every element against a reference implementation.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

collc="$BUILD_DIR/tools/collc/collc"
plan="$BUILD_DIR/ring_allreduce.plan"
program="$COLL_ROOT/stdlib/ring_allreduce.coll"

echo "== collc stdlib/ring_allreduce.coll --emit=summary"
"$collc" "$program" --emit=summary
echo
echo "== collc stdlib/ring_allreduce.coll --nranks 8 -o $plan --emit=verify-report"
"$collc" "$program" --nranks 8 --emit=verify-report
"$collc" "$program" --nranks 8 -o "$plan"
echo
echo "== coll-plan info $plan"
"$BUILD_DIR/tools/coll-plan/coll-plan" info "$plan"
echo
echo "== coll-run $plan --size 64M --dtype f32 --op sum (8 ranks as threads, checked)"
"$BUILD_DIR/tools/coll-run/coll-run" "$plan" --size 64M --dtype f32 --op sum
