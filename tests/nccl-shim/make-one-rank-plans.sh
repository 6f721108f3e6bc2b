#!/usr/bin/env bash
# Compiles one-rank plans of every collective that libcollc_nccl.so runs,
# and a selection table naming them, for the one-GPU run of PyTorch's nccl
# backend with Collc running the calls (torch_nccl_one_rank.py --collc).
# The device machine has no compiler: it takes the plans made here.
#
#   tests/nccl-shim/make-one-rank-plans.sh COLLC OUTDIR
set -euo pipefail
collc=$1
out=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"
rm -f "$out"/*.bin "$out/collc.select"
echo "# One-rank plans for libcollc_nccl.so (tests/nccl-shim/make-one-rank-plans.sh)" \
  >"$out/collc.select"
add() { # COLLECTIVE PROGRAM [-D root=0]
  local coll=$1 program=$2 name
  shift 2
  name=$(basename "$program" .coll)
  "$collc" "$program" --nranks 1 "$@" -o "$out/$name.bin"
  echo "$coll 1 any $name.bin" >>"$out/collc.select"
}
add allreduce "$root/tests/nccl-shim/one_rank_allreduce.coll"
add allgather "$root/stdlib/direct_allgather.coll"
add reducescatter "$root/stdlib/direct_reducescatter.coll"
add broadcast "$root/stdlib/binomial_broadcast.coll" -D root=0
add reduce "$root/stdlib/binomial_reduce.coll" -D root=0
add gather "$root/stdlib/direct_gather.coll" -D root=0
add scatter "$root/stdlib/direct_scatter.coll" -D root=0
add alltoall "$root/stdlib/alltoall_allpairs.coll"
