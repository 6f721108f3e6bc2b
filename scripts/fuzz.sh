#!/usr/bin/env bash
# Fuzzes the plan loader with libFuzzer for SECONDS (default 60): builds the
# runtime with clang, coverage and ASan+UBSan in build-fuzz/, seeds the
# corpus with plans compiled from the stdlib when collc is built in build/.
set -euo pipefail
COLL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
FUZZ_DIR="${FUZZ_BUILD_DIR:-$COLL_ROOT/build-fuzz}"
command -v clang++ >/dev/null || { echo "fuzz.sh needs clang (apt-get install clang)"; exit 1; }
CC=clang CXX=clang++ cmake -S "$COLL_ROOT" -B "$FUZZ_DIR" -G Ninja -DCOLL_BUILD_FUZZERS=ON \
  -DCOLL_BUILD_COMPILER=OFF -DCOLL_BUILD_TESTS=OFF -DCOLL_ENABLE_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$FUZZ_DIR" --target plan_loader_fuzz
corpus="$FUZZ_DIR/corpus"
mkdir -p "$corpus"
collc="$COLL_ROOT/build/tools/collc/collc"
if [ -x "$collc" ]; then
  for n in 2 3 5 8; do
    "$collc" "$COLL_ROOT/stdlib/ring_allreduce.coll" --nranks "$n" -o "$corpus/ring$n.bin"
    "$collc" "$COLL_ROOT/stdlib/tree_allreduce.coll" --nranks "$n" -o "$corpus/tree$n.bin"
  done
  "$collc" "$COLL_ROOT/stdlib/alltoall_twostep.coll" --nranks 4 -D local=2 -o "$corpus/twostep4.bin"
  # User-declared collectives: plans with a contract section.
  "$collc" "$COLL_ROOT/stdlib/sendrecv.coll" --nranks 3 -D nchunks=2 -o "$corpus/sendrecv3.bin"
  "$collc" "$COLL_ROOT/stdlib/neighbor_exchange.coll" --nranks 4 -o "$corpus/halo4.bin"
  "$collc" "$COLL_ROOT/stdlib/all_to_next.coll" --nranks 4 -D gpus_per_node=2 -o "$corpus/next4.bin"
fi
"$FUZZ_DIR/tests/fuzz/plan_loader_fuzz" -max_total_time="$SECONDS_TO_RUN" -rss_limit_mb=2048 "$corpus"
