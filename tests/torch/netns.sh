#!/usr/bin/env bash
# torch.distributed with backend="collc" across a real network: two network
# namespaces joined by a veth pair (scripts/netns-pair.sh), one torchrun
# node in each (`torchrun --nnodes 2`, the c10d store on node 0's address),
# NPROC processes per node. Runs ops.py (every operation, checked, beside
# Gloo over the same veth) and train.py (DDP and a pipeline).
#
#   netns.sh PYTHON NPROC PORT
#
# Exits 77 (skipped) where namespaces cannot be made (not root, no
# iproute2).
set -uo pipefail

python=$1
nproc=$2
port=$3
here=$(cd "$(dirname "$0")" && pwd)
pair=$here/../../scripts/netns-pair.sh
name="ctn$$"
name=${name:0:10}
if ! command -v ip >/dev/null || ! "$pair" up "$name" 2>/dev/null; then
  "$pair" down "$name"
  echo "torch netns: cannot create network namespaces here (root and iproute2 needed); skipped"
  exit 77
fi
out=$(mktemp -d)
trap '"$pair" down "$name"; rm -rf "$out"' EXIT
a=$("$pair" run "$name" a printenv COLL_NETNS_A)
status=0
for program in ops.py train.py; do
  port=$((port + 1))
  pids=()
  for node in 0 1; do
    side=a
    [[ $node -eq 1 ]] && side=b
    "$pair" run "$name" "$side" bash -c "GLOO_SOCKET_IFNAME=\$COLL_NETNS_DEV timeout 300 \
      '$python' -m torch.distributed.run --redirects 1 --tee 2 --nnodes 2 --node_rank $node \
      --nproc_per_node $nproc --master_addr $a --master_port $port '$here/$program'" \
      >"$out/$program.$node" 2>&1 &
    pids+=($!)
  done
  for node in 0 1; do
    if ! wait "${pids[node]}"; then
      echo "torch netns: $program failed on node $node"
      tail -40 "$out/$program.$node"
      status=1
    fi
  done
  grep -h "checks\|steps\|right" "$out/$program".* | sed "s/^/torch netns: $program: /" | head -20
done
exit $status
