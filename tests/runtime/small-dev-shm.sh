#!/bin/sh
# A job whose shared memory does not fit in /dev/shm (a container's 64 MB
# default, say) fails with an error that says how many bytes it needed, for
# which segment and where, instead of dying of SIGBUS at the first touch
# beyond the limit. Runs in a private mount namespace with a 1 MiB tmpfs on
# /dev/shm, and skips (exit 77) where it cannot make one (not root, no
# unshare, no mount).
#
#   small-dev-shm.sh COLL_RUN RUNTIME_SHM_RANK PLAN_DIR
set -u
collrun=$1
shmrank=$2
plans=$3

if [ "${4:-}" != inside ]; then
  if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null 2>&1 ||
    ! unshare -m --propagation private sh -c \
      'mount -t tmpfs -o size=1m tmpfs /dev/shm' >/dev/null 2>&1; then
    echo "skipped: cannot mount a small /dev/shm in a private mount namespace"
    exit 77
  fi
  exec unshare -m --propagation private sh "$0" "$collrun" "$shmrank" "$plans" inside
fi

mount -t tmpfs -o size=1m tmpfs /dev/shm || exit 1
failed=0
expect() { # NAME WANTED-STATUS STATUS OUTPUT PATTERN...
  name=$1 want=$2 got=$3 out=$4
  shift 4
  if [ "$got" != "$want" ]; then
    echo "FAIL: $name exited with $got, expected $want; output:"
    echo "$out"
    failed=1
    return
  fi
  for pattern in "$@"; do
    if ! printf '%s\n' "$out" | grep -q -- "$pattern"; then
      echo "FAIL: $name: no '$pattern' in:"
      echo "$out"
      failed=1
      return
    fi
  done
  echo "ok: $name"
}

# coll-run: each rank's FIFO needs 4 slots of 1 MiB (2M floats in 2
# chunks, slices of 256K elements), more than the 1 MiB there is.
out=$("$collrun" "$plans/ring_allreduce_n2.bin" --ranks-as processes --size 8M \
  --slice 262144 --iters 0 --timeout 20 2>&1)
expect "coll-run" 1 $? "$out" "coll-run: error: rank [01]: " \
  "cannot reserve [0-9]* bytes of shared memory for /coll-coll-run-[0-9-]*\.[01]\.1 in /dev/shm"

# collMemAlloc of 4 MiB fails, saying so, instead of handing out memory that
# is not there.
out=$("$shmrank" --job small-shm --rank 0 --nranks 1 --plan "$plans/star_allreduce_n1.bin" \
  --capi --count 1048576 2>&1)
expect "collMemAlloc" 3 $? "$out" \
  "error: collMemAlloc: cannot reserve 4194308 bytes of shared memory for /coll-small-shm\.0\.m1 in /dev/shm"

# Nothing is left behind.
left=$(ls /dev/shm)
if [ -n "$left" ]; then
  echo "FAIL: left in /dev/shm: $left"
  failed=1
fi
exit $failed
