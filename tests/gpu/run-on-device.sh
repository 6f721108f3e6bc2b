#!/usr/bin/env bash
# Builds the runtime and the GPU tests without the compiler, runs every GPU
# test and benchmark, and writes a report. For a machine with a GPU, CUDA,
# CMake and Ninja but no ANTLR, LLVM or package registry: the plans and, if
# needed, GoogleTest's sources come prepared (tests/gpu/prepare-device.sh).
#
#   tests/gpu/run-on-device.sh [PREPARED_DIR [REPORT_DIR]]
#
# PREPARED_DIR defaults to .device (plans/ and googletest/ inside);
# REPORT_DIR to $OUT when set, else gpu-report. The report: report.md (the
# GPU, driver, commands and results), and the logs of every step.
# Environment: BUILD_DIR (build-gpu), CUDA_ARCH (90), COLL_GPU_COUNTS (the
# sweep's counts, comma-separated; default 0,1,7,1000,1M+3,64M), SWEEP_FILTER
# (a gtest filter over the sweep's plans; default all, Plans/*).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prepared=$(cd "${1:-$root/.device}" && pwd)
report=${2:-${OUT:-$root/gpu-report}}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$report"
md=$report/report.md
status=0
step() { # NAME COMMAND...: runs, logs, records the exit status
  local name=$1
  shift
  local start=$SECONDS
  "$@" >"$report/$name.log" 2>&1
  local rc=$?
  echo "| $name | \`$*\` | $rc | $((SECONDS - start)) s |" >>"$md"
  [ $rc -eq 0 ] || status=1
  return $rc
}

{
  echo "# GPU report"
  echo
  echo '```'
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1
  nvcc --version 2>&1 | tail -2
  echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null) $(git -C "$root" status --porcelain 2>/dev/null | wc -l) files changed"
  echo '```'
  echo
  echo "| step | command | exit | time |"
  echo "|---|---|---|---|"
} >"$md"

gtest_args=()
[ -f "$prepared/googletest/CMakeLists.txt" ] && gtest_args=(-DCOLL_GTEST_SOURCE_DIR="$prepared/googletest")
step configure cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOLL_BUILD_COMPILER=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" "${gtest_args[@]}" &&
  step build ninja -C "$build" gpu_tests runtime_gpu_tests gpu_probe_tests coll-gpu-bench coll-run ||
  { cat "$md"; exit 1; }

export COLL_GPU_PLAN_DIR=$prepared/plans
step probe_tests "$build/tests/unit/gpu_probe_tests"
step core_tests "$build/tests/runtime/runtime_gpu_tests"
step gpu_tests "$build/tests/gpu/gpu_tests" --gtest_filter=-Plans/*
# The NCCL communicator's tests (one GPU: a one-rank communicator, and the
# kernel's network path over a loopback on every plan), where NCCL is found.
nccl_tests=()
if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^gpu_nccl_tests:' &&
  step build_nccl ninja -C "$build" gpu_nccl_tests; then
  nccl_tests=(nccl_tests)
  step nccl_tests "$build/tests/gpu/gpu_nccl_tests"
fi
step bench "$build/bench/gpu/coll-gpu-bench" "$prepared/plans"
step sweep "$build/tests/gpu/gpu_tests" --gtest_filter="${SWEEP_FILTER:-Plans/*}"

{
  echo
  echo "## Tests"
  for log in probe_tests core_tests gpu_tests "${nccl_tests[@]}"; do
    echo
    echo "### $log"
    echo '```'
    grep -E -A3 '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error' "$report/$log.log" | head -60
    echo '```'
  done
  echo
  echo "## Sweep"
  echo '```'
  grep -E '^\[ sweep    \]' "$report/sweep.log" | awk '{r+=$5; w+=$7; s+=$9} END {print NR " plans: " r " runs, " w " wrong, " s " skipped"}'
  grep -E '^\[  (PASSED|FAILED) |^\[==========\]' "$report/sweep.log" | tail -5
  grep -E -A1 'Failure' "$report/sweep.log" | grep -v -E 'Failure|^--' | head -30
  grep -E '^\[ sweep    \]' "$report/sweep.log" | grep -v ' 0 wrong' | head -30
  echo '```'
  echo
  echo "## Benchmark"
  echo '```'
  cat "$report/bench.log"
  echo '```'
} >>"$md"
cat "$md"
exit $status
