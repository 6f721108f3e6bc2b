#!/usr/bin/env bash
# Predictions against measurements across a shaped network: two network
# namespaces joined by a veth pair capped at RATE (scripts/netns-pair.sh:
# netem, or a token bucket where the kernel has no netem), coll-calibrate
# --network measuring the link as the process executor crosses it (UCX),
# then coll-perf with --predict on that description for each collective,
# NPROC ranks in each namespace.
#
#   bench/predict-netns.sh BUILD RATE NPROC [COLLECTIVES] [-- COLL-PERF ARGS...]
#
# e.g. bench/predict-netns.sh build 1gbit 1 "allreduce allgather alltoall"
# Needs root and iproute2. Prints the description, then each coll-perf
# table (rank 0's), whose last columns are the prediction and
# measured / predicted.
set -uo pipefail
build=$1
rate=$2
nproc=$3
colls=${4:-allreduce allgather alltoall}
shift $(($# < 4 ? $# : 4))
[[ ${1:-} == -- ]] && shift
extra=("$@")
[[ ${#extra[@]} -gt 0 ]] || extra=(-b 1M -e 64M -f 4 -n 5 -w 2)
root=$(cd "$(dirname "$0")/.." && pwd)
pair=$root/scripts/netns-pair.sh
name="pn$$"
name=${name:0:10}
"$pair" up "$name" 0 "$rate" || { echo "cannot make the namespaces (root needed)"; exit 77; }
tmp=$(mktemp -d)
trap '"$pair" down "$name"; rm -rf "$tmp"' EXIT
a=$("$pair" run "$name" a printenv COLL_NETNS_A)
port=$((29000 + $$ % 900))
export UCX_TLS=${UCX_TLS:-tcp}
# RANK-IN-NAMESPACE SIDE COMMAND...: runs it in the namespace of SIDE.
in_ns() {
  local side=$1
  shift
  ip netns exec "$name-$side" env UCX_NET_DEVICES="$name-v$side" "$@"
}
topo=$tmp/link.topo
# The two namespaces stand for two hosts but share this machine's CPUs:
# each host of the description gets half of them.
cpus=$(nproc)
half=$((cpus > 1 ? cpus / 2 : 1))
in_ns a "$build/tools/coll-calibrate/coll-calibrate" --network --bootstrap "tcp://$a:$port" \
  --rank 0 --ranks-per-node "$nproc" --threads "$half" --name "veth-$rate" -o "$topo" &
cal=$!
in_ns b "$build/tools/coll-calibrate/coll-calibrate" --network --bootstrap "tcp://$a:$port" \
  --rank 1 >/dev/null || { echo "calibration failed"; exit 1; }
wait $cal || { echo "calibration failed"; exit 1; }
cat "$topo"
n=$((2 * nproc))
for coll in $colls; do
  port=$((port + 1))
  pids=()
  for ((r = 0; r < n; r++)); do
    side=a
    ((r >= nproc)) && side=b
    in_ns $side "$build/tools/coll-perf/coll-perf" --coll "$coll" --nranks $n \
      --select "$root/stdlib/network.select" --bootstrap "tcp://$a:$port" --rank $r \
      --job "pn$port" --predict "$topo" "${extra[@]}" >"$tmp/$coll.$r" 2>&1 &
    pids+=($!)
  done
  status=0
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  [[ $status -eq 0 ]] || echo "# $coll: a rank failed"
  cat "$tmp/$coll.0"
done
