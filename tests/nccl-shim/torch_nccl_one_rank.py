"""One rank, backend "nccl", CUDA tensors: the operations a one-rank group
has, each checked, and a CUDA-graph-captured all_reduce replayed. Run it
with and without the library in front of NCCL; both must print ALL OK:

    python3 tests/nccl-shim/torch_nccl_one_rank.py
    COLLC_NCCL_DEBUG=1 COLLC_NCCL_LIB=<torch's libnccl.so.2> \
      LD_PRELOAD=build/runtime/nccl-shim/libcollc_nccl.so \
      python3 tests/nccl-shim/torch_nccl_one_rank.py

With one rank these operations are copies or nothing, and NCCL captures
nothing in the graph. Through the library with a selection of one-rank
plans (tests/nccl-shim/run-torch-one-rank.sh), Collc runs the calls
instead: its kernels copy, and the graph captures them.
"""
import os, sys, torch, torch.distributed as dist
os.environ.setdefault("MASTER_ADDR", "127.0.0.1"); os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
dev = torch.device("cuda:0"); bad = 0
def check(name, got, want):
    global bad
    ok = torch.equal(got.cpu(), want.cpu()); bad += not ok
    print(f"{name}: {'ok' if ok else 'WRONG'}", flush=True)
for dt in (torch.float32, torch.bfloat16, torch.int64):
    x = (torch.arange(1000, device=dev) * 3 % 17).to(dt)
    y = x.clone(); dist.all_reduce(y); check(f"all_reduce {dt}", y, x)
    y = x.clone(); dist.all_reduce(y, op=dist.ReduceOp.MAX); check(f"all_reduce max {dt}", y, x)
    y = x.clone(); dist.broadcast(y, 0); check(f"broadcast {dt}", y, x)
    y = x.clone(); dist.reduce(y, 0); check(f"reduce {dt}", y, x)
    o = torch.empty_like(x); dist.all_gather_into_tensor(o, x); check(f"all_gather_into_tensor {dt}", o, x)
    o = torch.empty_like(x); dist.reduce_scatter_tensor(o, x); check(f"reduce_scatter_tensor {dt}", o, x)
    o = torch.empty_like(x); dist.all_to_all_single(o, x); check(f"all_to_all_single {dt}", o, x)
    l = [torch.empty_like(x)]; dist.all_gather(l, x); check(f"all_gather {dt}", l[0], x)
    g = [torch.empty_like(x)]; dist.gather(x, g, dst=0); check(f"gather {dt}", g[0], x)
    o = torch.empty_like(x); dist.scatter(o, [x], src=0); check(f"scatter {dt}", o, x)
dist.barrier()
# CUDA graph capture of an all_reduce.
s = torch.cuda.Stream(); x = torch.arange(4096, device=dev, dtype=torch.float32)
with torch.cuda.stream(s):
    dist.all_reduce(x)  # warm-up outside the graph
torch.cuda.synchronize(); g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=s):
    dist.all_reduce(x)
for i in range(3):
    x.copy_(torch.arange(4096, device=dev, dtype=torch.float32) + i); g.replay()
    torch.cuda.synchronize(); check(f"graph replay {i}", x, torch.arange(4096, dtype=torch.float32) + i)
dist.destroy_process_group()
print("WRONG" if bad else "ALL OK", bad, flush=True)
sys.exit(1 if bad else 0)
