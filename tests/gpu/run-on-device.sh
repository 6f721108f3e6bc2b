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
# (a gtest filter over the sweep's tests; default all, Plans/*),
# SWEEP_FIRST (plan names, e.g. 'oneshot*:*_n8', swept first as a step of
# their own), COLL_GPU_TIMEOUT (the seconds a wait of the sweep may take
# before it fails; a timeout stops that protocol's runs of the plan;
# default 30), RUN_SECONDS
# (a time budget for the whole run: each step is stopped at what is left of
# it, less 20 s for the report; a step that finds nothing left is skipped)
# and STEP_SECONDS (the most any one test step may take; default no limit),
# STEPS (the names of the steps to run, space-separated, e.g. "gpu_tests
# bench sweep"; configure and build always run; default all).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
prepared=$(cd "${1:-$root/.device}" && pwd)
report=${2:-${OUT:-$root/gpu-report}}
build=${BUILD_DIR:-$root/build-gpu}
mkdir -p "$report"
md=$report/report.md
status=0
deadline=${RUN_SECONDS:+$((SECONDS + RUN_SECONDS - 20))}
# NAME COMMAND...: runs, logs, records the exit status (124: out of time).
# A test step (any but configure and build) takes at most STEP_SECONDS.
step() {
  local name=$1
  shift
  if [ -n "${STEPS:-}" ] && [[ " $STEPS " != *" $name "* ]] && [[ $name != configure && $name != build ]]; then
    echo "| $name | \`$*\` | skipped: not in STEPS | |" >>"$md"
    return 1
  fi
  local limit=0
  case $name in configure | build*) ;; *) limit=${STEP_SECONDS:-0} ;; esac
  if [ -n "$deadline" ]; then
    local left=$((deadline - SECONDS))
    if [ $left -le 0 ]; then
      echo "| $name | \`$*\` | skipped: no time left | |" >>"$md"
      status=1
      return 1
    fi
    [ "$limit" -gt 0 ] && [ "$limit" -lt $left ] || limit=$left
  fi
  local start=$SECONDS
  timeout "$limit" stdbuf -oL -eL "$@" >"$report/$name.log" 2>&1
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
# The Python on the path, where it has torch (a virtual environment's), for
# the PyTorch backend; CMake would look in /usr/bin first.
python=$(command -v python3)
torch_args=()
[ -n "$python" ] && "$python" -c 'import torch' 2>/dev/null && torch_args=(-DCOLL_TORCH_PYTHON="$python")
step configure cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCOLL_BUILD_COMPILER=OFF -DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCH:-90}" "${gtest_args[@]}" \
  "${torch_args[@]}" ||
  { cat "$md"; exit 1; }
# One build of everything, so that the slow kernel files compile side by
# side: the NCCL communicator's tests and library, and the PyTorch backend,
# too where NCCL and torch are found (optional_targets). ninja -k 0
# goes on past a failure; only the optional targets may fail to build.
targets=(gpu_tests runtime_gpu_tests gpu_probe_tests coll-gpu-bench coll-run coll-calibrate)
optional_targets=()
# (Not `| grep -q`: under pipefail, grep's early exit fails the pipeline.)
all_targets=$(ninja -C "$build" -t targets all 2>/dev/null)
# STEPS: only what its steps need.
wanted() { [ -z "${STEPS:-}" ] || [[ " $STEPS " == *" $1 "* ]]; }
grep -q '^gpu_nccl_tests:' <<<"$all_targets" && wanted nccl_tests && optional_targets=(gpu_nccl_tests)
grep -q '^collc_nccl:' <<<"$all_targets" && wanted shim_torch && optional_targets+=(collc_nccl)
grep -q '^collc_torch_ext:' <<<"$all_targets" && { wanted torch_backend || wanted torch_train; } &&
  optional_targets+=(collc_torch_ext collc_torch_py)
step build ninja -k 0 -C "$build" "${targets[@]}" "${optional_targets[@]}"
ninja -C "$build" "${targets[@]}" >>"$report/build.log" 2>&1 || { cat "$md"; exit 1; }

export COLL_GPU_PLAN_DIR=$prepared/plans
step probe_tests "$build/tests/unit/gpu_probe_tests"
step core_tests "$build/tests/runtime/runtime_gpu_tests"
step gpu_tests "$build/tests/gpu/gpu_tests" --gtest_filter=-Plans/*
# The one-device mode's description for the predictor, measured through
# the runtime (docs/prediction.md, "The GPU's one-device mode").
step calibrate "$build/tools/coll-calibrate/coll-calibrate" --ranks-as gpu -o "$report/gpu.topo"
step bench "$build/bench/gpu/coll-gpu-bench" "$prepared/plans"
# The benchmark's latency table against the predictions on the description
# just measured, with the prepared collc.
if [ -x "$prepared/tools/collc" ] && [ -f "$report/gpu.topo" ] && [ -f "$report/bench.log" ]; then
  step predict env LD_LIBRARY_PATH="$prepared/tools${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
    python3 "$root/bench/predict-gpu.py" "$prepared/tools/collc" "$report/bench.log" "$report/gpu.topo"
fi
# The NCCL communicator's tests (one GPU: a one-rank communicator, and the
# kernel's network path over a loopback on every plan), where NCCL is found.
optional_logs=()
if [ ${#optional_targets[@]} -gt 0 ] && [ -x "$build/tests/gpu/gpu_nccl_tests" ]; then
  optional_logs=(nccl_tests)
  step nccl_tests "$build/tests/gpu/gpu_nccl_tests"
fi
# PyTorch's nccl backend on this GPU through libcollc_nccl.so, Collc running
# every selected call (tests/nccl-shim/run-torch-one-rank.sh), where torch
# and the prepared one-rank plans are at hand.
shim=$build/runtime/nccl-shim/libcollc_nccl.so
if [ -f "$shim" ] && [ -f "$prepared/shim/collc.select" ] &&
  python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
  optional_logs+=(shim_torch)
  step shim_torch bash "$root/tests/nccl-shim/run-torch-one-rank.sh" "$shim" "$prepared/shim"
fi
# The PyTorch backend (backend="collc", CPU tensors) on this machine's torch:
# the operations on 2 ranks by mp.spawn and DDP on 2 under torchrun (the GPU
# hidden: PowerSGD's hook synchronises a CUDA device whenever one exists,
# also for CPU gradients), plans compiled by the prepared collc.
if ls "$build"/python/collc_torch/_C*.so >/dev/null 2>&1 && [ -x "$prepared/tools/collc" ]; then
  optional_logs+=(torch_backend torch_train)
  torch_env=(env COLLC="$prepared/tools/collc" LD_LIBRARY_PATH="$prepared/tools${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    COLLC_TORCH_PATH="$build/python" COLLC_CACHE_DIR="$build/plan-cache")
  step torch_backend "${torch_env[@]}" "$python" "$root/tests/torch/ops.py" --spawn 2
  step torch_train "${torch_env[@]}" CUDA_VISIBLE_DEVICES= "$python" -m torch.distributed.run \
    --nproc_per_node 2 --master_port 29611 "$root/tests/torch/train.py"
fi
# SWEEP_FIRST (a gtest filter): those plans first, as a step of their own,
# so that a time budget that cuts the sweep short cuts other plans.
sweep_logs=()
# A plan name pattern (oneshot*) becomes the sweep test's name
# (Plans/PlanSweep.EveryTypeOpCountAndPlacement/oneshot*); a pattern with a
# slash is taken as a gtest pattern as it is.
sweep_patterns() {
  local out=() p
  IFS=: read -r -a ps <<<"$1"
  for p in "${ps[@]}"; do
    case $p in */*) out+=("$p") ;; *) out+=("Plans/*/$p") ;; esac
  done
  (IFS=:; echo "${out[*]}")
}
if [ -n "${SWEEP_FIRST:-}" ]; then
  SWEEP_FIRST=$(sweep_patterns "$SWEEP_FIRST")
  sweep_logs+=(sweep_first)
  step sweep_first "$build/tests/gpu/gpu_tests" --gtest_filter="$SWEEP_FIRST"
  sweep_logs+=(sweep)
  step sweep "$build/tests/gpu/gpu_tests" --gtest_filter="${SWEEP_FILTER:-Plans/*}-$SWEEP_FIRST"
else
  sweep_logs+=(sweep)
  step sweep "$build/tests/gpu/gpu_tests" --gtest_filter="${SWEEP_FILTER:-Plans/*}"
fi

{
  echo
  echo "## Tests"
  for log in probe_tests core_tests gpu_tests "${optional_logs[@]}"; do
    echo
    echo "### $log"
    echo '```'
    grep -E -A3 '^\[  (PASSED|FAILED|SKIPPED) |^\[==========\]|Failure|error|FAILED|OK$| checks, |from gloo' "$report/$log.log" | head -60
    echo '```'
  done
  echo
  echo "## Sweep"
  echo '```'
  sweeps=("${sweep_logs[@]/#/$report/}")
  sweeps=("${sweeps[@]/%/.log}")
  cat "${sweeps[@]}" 2>/dev/null | grep -E '^\[ sweep    \]' |
    awk '{r+=$5; w+=$7; s+=$9} END {print NR " plans: " r " runs, " w " wrong, " s " skipped"}'
  cat "${sweeps[@]}" 2>/dev/null | grep -E '^\[  (PASSED|FAILED) |^\[==========\]' | tail -5
  cat "${sweeps[@]}" 2>/dev/null | grep -E -A1 'Failure' | grep -v -E 'Failure|^--' | head -30
  cat "${sweeps[@]}" 2>/dev/null | grep -E '^\[ sweep    \]' | grep -v ' 0 wrong' | head -30
  echo '```'
  echo
  echo "## Calibration"
  echo '```'
  cat "$report/calibrate.log" "$report/gpu.topo" 2>/dev/null
  echo '```'
  echo
  echo "## Predicted against the benchmark"
  echo
  tail -12 "$report/predict.log" 2>/dev/null
  echo
  echo "## Benchmark"
  echo '```'
  cat "$report/bench.log"
  echo '```'
} >>"$md"
cat "$md"
exit $status
