#!/usr/bin/env bash
# Compiles the plans the GPU tests run: every stdlib program (at each N its
# requirements accept) and every algorithm of
# tests/runtime/Inputs/collectives.coll, for N = 2..8, and a
# one-rank plan (tests/runtime/Inputs/star_allreduce.coll at N = 1).
#
#   tests/gpu/make-plans.sh COLLC OUTDIR
#
# The device machine that runs tests/gpu/run-on-device.sh needs no compiler:
# it takes the plans made here.
set -euo pipefail
collc=$1
out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
rm -f "$out"/*.bin
compile() { # NAME N ARGS...
  local name=$1 n=$2
  shift 2
  "$collc" "$@" --nranks "$n" --emit=plan -o "$out/${name}_n$n.bin"
}
# A library program that a `require` of its own rejects at N is left out
# at that N (its message is the program's answer); any other error stops.
skipped=0
compile_lib() { # NAME N ARGS...
  local err
  if ! err=$(compile "$@" 2>&1); then
    if [[ $err == *"requirement failed for N = $2"* ]]; then
      skipped=$((skipped + 1))
    else
      echo "$err" >&2
      exit 1
    fi
  fi
}
for n in 2 3 4 5 6 7 8; do
  for src in "$root"/stdlib/*.coll; do
    name=$(basename "$src" .coll)
    case $name in
    alltoall_twostep) compile_lib "$name" "$n" "$src" -D local=$((n % 2 == 0 ? 2 : 1)) ;;
    hierarchical_allreduce | hierarchical_tree_allreduce)
      compile_lib "$name" "$n" "$src" -D gpus_per_node=$((n % 2 == 0 ? 2 : 1)) ;;
    *) compile_lib "$name" "$n" "$src" ;;
    esac
  done
  for algo in ring_allgather_inplace staged_allgather ring_reducescatter_inplace \
    chain_broadcast_inplace chain_reduce_inplace direct_reduce direct_gather direct_scatter \
    ring_allreduce_x2; do
    compile "$algo" "$n" "$root/tests/runtime/Inputs/collectives.coll" --algorithm="$algo" -D root=1
  done
done
# One rank: the plan has no threadblocks (the executors launch no CTA).
compile star_allreduce 1 "$root/tests/runtime/Inputs/star_allreduce.coll"
echo "$(ls "$out"/*.bin | wc -l) plans in $out ($skipped rank counts left out by a program's require)"
