#!/usr/bin/env bash
# Jobs across a real network: two network namespaces joined by a veth pair
# (scripts/netns-pair.sh), ranks of coll-run --bootstrap in each, so that
# every connection between the namespaces crosses a network device (ranks
# of one namespace share memory). Checks every rank's output on 2, 3 and 4
# ranks over several plans; then a rank killed on one side, and the link
# cut in the middle of a run: the other side must fail naming the lost
# rank, within the timeout, and leave no shared memory behind.
#
#   net-namespaces.sh COLL_RUN PLAN_DIR [CAPI_MPI_TEST MPIRUN]
#
# With CAPI_MPI_TEST (tests/runtime/capi_mpi_test.c) and MPIRUN, the C API
# too: mpirun launches the test into both namespaces as onto two hosts (an
# rsh agent that enters the namespace), 2 and 3 ranks, every element
# checked.
#
# Exits 77 (skipped) where namespaces cannot be made (not root, no
# iproute2) or coll-run has no network transport.
set -uo pipefail

collrun=$1
plans=$2
root=$(cd "$(dirname "$0")/../.." && pwd)
pair=$root/scripts/netns-pair.sh
name="cnt$$"
name=${name:0:10}
fails=0
out=$(mktemp -d)

cleanup() {
  "$pair" down "$name"
  rm -rf "$out"
}

if ! command -v ip >/dev/null || ! "$pair" up "$name" 2>/dev/null; then
  "$pair" down "$name"
  echo "net-namespaces: cannot create network namespaces here (root and iproute2 needed); skipped"
  exit 77
fi
trap cleanup EXIT
a=$("$pair" run "$name" a printenv COLL_NETNS_A)

fail() {
  echo "net-namespaces: FAIL: $*"
  fails=$((fails + 1))
}

# run_job TAG PLAN SIDES EXTRA...: rank r runs in namespace SIDES[r] (a
# string such as "aabb"); every rank must exit 0, rank 0 printing no wrong
# element.
port=29700
run_job() {
  local tag=$1 plan=$2 sides=$3
  shift 3
  local n=${#sides} pids=() r status=0
  port=$((port + 1))
  for ((r = 0; r < n; r++)); do
    "$pair" run "$name" "${sides:r:1}" timeout 120 "$collrun" "$plans/$plan" \
      --bootstrap "tcp://$a:$port" --rank "$r" --job "nn$$-$port" --timeout 30 "$@" \
      >"$out/$tag.$r" 2>&1 &
    pids+=($!)
  done
  for ((r = 0; r < n; r++)); do
    wait "${pids[r]}" || status=1
  done
  if [[ $status -ne 0 ]] || ! grep -q "wrong" "$out/$tag.0"; then
    fail "$tag ($plan on $sides $*)"
    cat "$out/$tag".*
    return
  fi
  echo "net-namespaces: ok: $tag: $(tail -1 "$out/$tag.0")"
  local remote
  remote=$(printf '%s' "$sides" | tr -cd b | wc -c)
  if ! grep -q "($remote of $n ranks on other hosts" "$out/$tag.0"; then
    fail "$tag: rank 0 does not see the ranks of the other namespace as remote"
    head -3 "$out/$tag.0"
  fi
}

if ! "$collrun" --help 2>&1 | grep -q bootstrap; then
  echo "net-namespaces: coll-run has no --bootstrap; skipped"
  exit 77
fi

run_job ring2 ring_allreduce_n2.bin ab --size 1M --iters 3
run_job ring2-odd ring_allreduce_n2.bin ab --size 300001 --dtype bf16 --op max --iters 2
run_job tree3 tree_allreduce_n3.bin aab --size 64K --iters 3
run_job ring4 ring_allreduce_n4.bin aabb --size 1M --iters 3
run_job ring4-alternate ring_allreduce_n4.bin abab --size 1M --iters 3 --inplace
run_job allgather4 stdlib_ring_allgather_n4.bin aabb --size 256K --iters 3
run_job reducescatter4 stdlib_ring_reducescatter_n4.bin abab --size 256K --iters 3
run_job alltoall4 alltoall_twostep_n4.bin aabb --size 256K --iters 3
run_job broadcast4 stdlib_tree_broadcast_n4.bin abab --size 256K --iters 3
run_job reduce3 chain_reduce_inplace_n3.bin aab --size 256K --iters 2 --inplace
run_job reduce4 direct_reduce_n4.bin abab --size 100003 --dtype f64 --op min --iters 2
run_job gather3 direct_gather_n3.bin abb --size 64K --iters 2
run_job scatter4 direct_scatter_n4.bin aabb --size 64K --iters 2
run_job allgather3 ring_allgather_n3.bin aab --size 96K --iters 2
run_job alltoall3 alltoall_allpairs_n3.bin abb --size 96K --iters 2
if ls /dev/shm | grep -q "^coll-nn$$-"; then
  fail "shared memory left behind: $(ls /dev/shm | grep "^coll-nn$$-")"
fi

# The C API under mpirun (collCommInitMpi), ranks split between the
# namespaces as between two hosts.
if [[ $# -ge 4 && -x "$3" ]]; then
  capi=$3
  mpirun=$4
  agent=$out/rsh-agent
  b=$("$pair" run "$name" b printenv COLL_NETNS_B)
  cat >"$agent" <<AGENT
#!/bin/sh
host=\$1; shift
case \$host in $a) ns=$name-a ;; *) ns=$name-b ;; esac
exec ip netns exec \$ns sh -c "\$*"
AGENT
  chmod +x "$agent"
  for spec in "2 $a:1,$b:1" "3 $a:2,$b:1"; do
    set -- $spec
    n=$1
    if "$pair" run "$name" a timeout 120 "$mpirun" --allow-run-as-root --oversubscribe -np "$n" \
      --host "$2" --mca plm_rsh_agent "$agent" --mca btl tcp,self \
      --mca btl_tcp_if_include "${a%.*}.0/24" -x COLL_STORE_HOST="$a" \
      -x ASAN_OPTIONS="detect_leaks=0:abort_on_error=0" \
      "$capi" "$plans/ring_allreduce_n$n.bin" >"$out/capi.$n" 2>&1 &&
      grep -q "$n ranks right" "$out/capi.$n"; then
      echo "net-namespaces: ok: C API under mpirun, $n ranks: $(grep 'ranks right' "$out/capi.$n")"
    else
      fail "C API under mpirun, $n ranks"
      tail -20 "$out/capi.$n"
    fi
  done
fi

# fault_job TAG ACTION: ranks 0 and 1 in a, 2 and 3 in b, a long run; ACTION
# (a command) strikes after a second. Every rank of side a must fail with
# an error naming a rank of side b, well within the timeout.
fault_job() {
  local tag=$1 action=$2 pids=() r
  port=$((port + 1))
  local start=$SECONDS
  for r in 0 1 2 3; do
    local side=a
    [[ $r -ge 2 ]] && side=b
    "$pair" run "$name" "$side" timeout 60 "$collrun" "$plans/ring_allreduce_n4.bin" \
      --bootstrap "tcp://$a:$port" --rank "$r" --job "nf$$-$port" --size 4M --iters 1000000 \
      --no-check --timeout 6 >"$out/$tag.$r" 2>&1 &
    pids+=($!)
  done
  sleep 2
  eval "$action"
  for r in 0 1; do
    if wait "${pids[r]}"; then
      fail "$tag: rank $r succeeded"
    elif ! grep -Eq "rank [23] \(pid [0-9]+ on another host\)" "$out/$tag.$r"; then
      fail "$tag: rank $r does not name the lost rank"
      cat "$out/$tag.$r"
    else
      echo "net-namespaces: ok: $tag: rank $r: $(grep -m1 error "$out/$tag.$r" | cut -c1-200)"
    fi
  done
  if [[ $((SECONDS - start)) -gt 30 ]]; then
    fail "$tag: the ranks took $((SECONDS - start)) s to fail"
  fi
  for r in 2 3; do
    kill "${pids[r]}" 2>/dev/null
    wait "${pids[r]}" 2>/dev/null
  done
  # Side a's ranks removed their own; side b's were killed or cut off:
  # what they left is theirs (the next job there removes it).
  if ls /dev/shm | grep -q "^coll-nf$$-$port\.[01]"; then
    fail "$tag: side a left shared memory: $(ls /dev/shm | grep "^coll-nf$$-$port")"
  fi
  rm -f /dev/shm/coll-nf$$-$port.*
}

# Rank 3 killed: its connections break at once.
fault_job kill 'pkill -KILL -f -- "--rank 3 --job nf$$-$port"'
# The link cut: nothing more arrives, nothing breaks; silence or the run's
# timeout tells.
fault_job cut 'ip -n "$name-b" link set "$name-vb" down'
ip -n "$name-b" link set "$name-vb" up

if [[ $fails -ne 0 ]]; then
  echo "net-namespaces: $fails failures"
  exit 1
fi
echo "net-namespaces: all passed"
