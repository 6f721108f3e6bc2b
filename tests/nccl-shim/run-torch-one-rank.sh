#!/usr/bin/env bash
# PyTorch's nccl backend on one GPU, with plain NCCL and then with
# libcollc_nccl.so in front of it running every selected call on Collc
# (COLLC_NCCL_STRICT: a call Collc cannot run fails instead of going to
# NCCL): torch_nccl_one_rank.py (the operations, and a CUDA-graph-captured
# all_reduce replayed), and the PyTorch backend's test program
# (tests/torch/ops.py) on CUDA tensors under torchrun. Every run must pass,
# and those through the library must say that Collc set up allreduce,
# broadcast, reduce and allgather, captured the graph's
# all_reduce, and ran the list form of all_to_all (a send/recv group,
# COLLC_NCCL_GROUPS) as an alltoall. (A one-rank reduce_scatter never
# reaches NCCL: PyTorch 2.11 copies it itself, NCCL_DEBUG=INFO shows no
# ReduceScatter with plain NCCL either.)
#
#   tests/nccl-shim/run-torch-one-rank.sh SHIM PLANS_DIR
#
# PLANS_DIR: tests/nccl-shim/make-one-rank-plans.sh's output.
set -uo pipefail
shim=$1
plans=$2
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}
ops=("$python" -m torch.distributed.run --nproc_per_node 1 "$here/../torch/ops.py" --backend nccl
  --device cuda)
echo "== plain NCCL"
"$python" "$here/torch_nccl_one_rank.py" || { echo "FAILED: plain NCCL"; exit 1; }
"${ops[@]}" || { echo "FAILED: ops.py on plain NCCL"; exit 1; }
# The NCCL that torch loads: its wheel's, else the library path's.
find_wheel_nccl() {
  "$python" -c 'import glob, os, site
dirs = site.getsitepackages() + [site.getusersitepackages()]
hits = [h for d in dirs for h in glob.glob(os.path.join(d, "nvidia", "nccl*", "lib", "libnccl.so.2"))]
print(hits[0] if hits else "")'
}
real=${COLLC_NCCL_LIB:-$(find_wheel_nccl)}
echo "== through libcollc_nccl.so (real NCCL: ${real:-found on the library path})"
log=$(mktemp)
through=(env ${real:+COLLC_NCCL_LIB=$real} COLLC_NCCL_SELECT="$plans/collc.select"
  COLLC_NCCL_STRICT=1 COLLC_NCCL_DEBUG=1 COLLC_NCCL_GROUPS=all LD_PRELOAD="$shim")
status=0
"${through[@]}" "$python" "$here/torch_nccl_one_rank.py" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "FAILED: the run through the library exited with $rc"; status=1; }
"${through[@]}" "${ops[@]}" 2>&1 | tee -a "$log"
rc=${PIPESTATUS[0]}
[ "$rc" -eq 0 ] || { echo "FAILED: ops.py through the library exited with $rc"; status=1; }
grep -q "collc-nccl: communicator of 1 ranks" "$log" ||
  { echo "FAILED: no line for the communicator"; status=1; }
for want in "allreduce (plan one_rank_allreduce)" "broadcast (plan binomial_broadcast)" \
  "reduce (plan binomial_reduce)" "allgather (plan direct_allgather)"; do
  grep -q "set up $want on Collc" "$log" || { echo "FAILED: Collc did not set up $want"; status=1; }
done
grep -q "ran a send/recv group as alltoall on Collc" "$log" ||
  { echo "FAILED: the list form of all_to_all (a send/recv group) did not run on Collc"; status=1; }
grep -q "captured allreduce (plan one_rank_allreduce) into a CUDA graph on Collc" "$log" ||
  { echo "FAILED: the captured all_reduce did not run on Collc"; status=1; }
echo "== Collc set up:"
grep -o "set up .* on Collc" "$log" | sort -u
if grep -q "the call goes to NCCL\|cannot set up\|cannot run" "$log"; then
  echo "FAILED: a selected call did not run on Collc"
  status=1
fi
rm -f "$log"
[ $status -eq 0 ] && echo "TORCH ONE RANK THROUGH COLLC: OK"
exit $status
