"""torch.distributed operations on collc beside Gloo, in one run.

Every rank creates a collc group (the default) and a Gloo group on the same
processes; for each operation and size the two are timed in turn,
interleaved, several repetitions each, and the medians printed with their
ratio. Time per call in microseconds (the slowest rank's, as nccl-tests
reports), and bus bandwidth with nccl-tests' factors.

    python3 bench/torch/bench.py --spawn 2 -b 4K -e 64M
    python3 bench/torch/bench.py --spawn 4 --ops all_reduce --csv
    python3 bench/torch/bench.py --spawn 2 --registered

--registered gives collc tensors in its registered memory
(collc_torch.empty), which peers read where it lies; Gloo's stay ordinary.

--versus-coll-perf 4K also times, for every size up to 4 KiB, the very
plan the collc group ran (collc_torch.plan_for) in coll-perf on as many
processes, in turn with the torch calls and as many of them, and prints
its time and the difference: what the torch layer costs a call. The torch
ranks wait in a Gloo barrier meanwhile (they sleep).

(or under torchrun, without --spawn: rank 0 prints the table).
"""

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.environ.get("COLLC_TORCH_PATH", ""))
import collc_torch  # noqa: E402,F401


def parse_size(text):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.upper().rstrip("B")
    return int(text[:-1]) * mult[text[-1]] if text[-1] in mult else int(text)


def make_op(name, nbytes, n, rank, group, registered=False):
    """A callable running op `name` on a message of nbytes (nccl-tests' size:
    the larger per-rank buffer) and its bus bandwidth factor; with
    registered, on tensors from collc_torch.empty."""
    count = max(1, nbytes // 4)

    def ones(k):
        if not registered:
            return torch.ones(k)
        t = collc_torch.empty(k, group=group)
        t.fill_(1)
        return t

    def empty(k):
        return collc_torch.empty(k, group=group) if registered else torch.empty(k)

    if name == "all_reduce":
        t = ones(count)
        return (lambda: dist.all_reduce(t, group=group)), 2 * (n - 1) / n
    if name == "broadcast":
        t = ones(count)
        return (lambda: dist.broadcast(t, src=0, group=group)), 1.0
    if name == "all_gather":
        # The list form: Gloo has no all_gather_into_tensor.
        per = max(1, count // n)
        outs = [empty(per) for _ in range(n)]
        inp = ones(per)
        return (lambda: dist.all_gather(outs, inp, group=group)), (n - 1) / n
    if name == "all_to_all_single":
        per = max(1, count // n)
        inp, out = ones(per * n), empty(per * n)
        return (lambda: dist.all_to_all_single(out, inp, group=group)), (n - 1) / n
    raise ValueError(name)


def time_op(fn, iters, warmup, group):
    for _ in range(warmup):
        fn()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        fn()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX, group=group)
    return elapsed.item() * 1e6


# Each operation as Collc names its collective, and how coll-perf places its
# buffers for the torch call's (in place where torch's tensor is both).
COLL_PERF_FORM = {
    "all_reduce": ("allreduce", "in-place"),
    "broadcast": ("broadcast", "in-place"),
    "all_gather": ("allgather", "out-of-place"),
    "all_to_all_single": ("alltoall", "out-of-place"),
}


def coll_perf_path():
    """coll-perf beside the compiler collc_torch uses: installed side by side,
    or in the build tree's tools/coll-perf."""
    collc = collc_torch.paths()["collc"]
    here = os.path.dirname(collc)
    for candidate in (os.path.join(here, "coll-perf"),
                      os.path.join(here, "..", "coll-perf", "coll-perf")):
        if os.access(candidate, os.X_OK):
            return os.path.normpath(candidate)
    sys.exit("bench.py: no coll-perf beside %s" % collc)


def time_coll_perf(op, size, n, iters, warmup):
    """coll-perf's time per call (us) for the plan the collc group runs for
    op at size on n ranks, as processes."""
    collective, placement = COLL_PERF_FORM[op]
    plan = collc_torch.plan_for(collective, n, size, 0)
    if not plan["file"]:
        sys.exit("bench.py: no plan file for %s" % collective)
    out = subprocess.run(
        [coll_perf_path(), plan["file"], "--ranks-as", "processes", "-b", str(size), "-e",
         str(size), "-n", str(iters), "-w", str(warmup), "--placement", placement, "--csv"],
        capture_output=True, text=True)
    rows = [line.split(",") for line in out.stdout.splitlines()]
    if out.returncode or len(rows) < 2:
        sys.exit("bench.py: coll-perf failed:\n" + out.stdout + out.stderr)
    return float(rows[1][rows[0].index("time_us")]), plan["name"]


def free_port():
    """A TCP port nothing listens on now (the kernel's choice), for the store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(spawn_rank=None, args=None):
    if spawn_rank is not None:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
        dist.init_process_group("collc", rank=spawn_rank, world_size=args.spawn)
    else:
        dist.init_process_group("collc")
    run(args)


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("-b", default="4K")
    p.add_argument("-e", default="64M")
    p.add_argument("-f", type=int, default=4)
    p.add_argument("-n", type=int, default=20, help="timed iterations")
    p.add_argument("-w", type=int, default=5, help="warm-up iterations")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ops", default="all_reduce,all_gather,broadcast,all_to_all_single")
    p.add_argument("--csv", action="store_true")
    p.add_argument("--registered", action="store_true",
                   help="collc's tensors in its registered memory (collc_torch.empty)")
    p.add_argument("--spawn", type=int, default=0, help="ranks to start (torch.multiprocessing)")
    p.add_argument("--versus-coll-perf", default="0", metavar="BYTES",
                   help="up to this size, also time the same plan in coll-perf")
    p.add_argument("--port", type=int, default=0,
                   help="the store's port (default: a free one)")
    return p.parse_args()


def run(args):
    rank, n = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    collc = dist.group.WORLD
    sizes = []
    s = parse_size(args.b)
    while s <= parse_size(args.e):
        sizes.append(s)
        s *= args.f
    versus = parse_size(args.versus_coll_perf)
    if rank == 0:
        if args.csv:
            print("op,nranks,size_bytes,collc_us,gloo_us,collc_busbw_GBps,gloo_busbw_GBps,speedup"
                  + (",coll_perf_us,plan" if versus else ""))
        else:
            print("# %d ranks, f32, median of %d repetitions of %d calls%s" % (
                n, args.reps, args.n, "; collc on registered tensors" if args.registered else ""))
            print("%-18s %10s %12s %12s %10s %10s %8s" % (
                "op", "size", "collc us", "gloo us", "collc GB/s", "gloo GB/s", "speedup")
                + ("  %12s %8s  %s" % ("coll-perf us", "torch +", "plan") if versus else ""))
    for op in args.ops.split(","):
        for size in sizes:
            iters = args.n if size < (16 << 20) else max(3, args.n // 4)
            times = {"collc": [], "gloo": [], "coll-perf": []}
            plan = ""
            for _ in range(args.reps):
                for name, group in (("collc", collc), ("gloo", gloo)):
                    fn, _ = make_op(op, size, n, rank, group,
                                    registered=args.registered and name == "collc")
                    times[name].append(time_op(fn, iters, args.w, group))
                if size <= versus:
                    # Rank 0 runs coll-perf; the others sleep in Gloo's barrier.
                    if rank == 0:
                        t, plan = time_coll_perf(op, size, n, iters, args.w)
                        times["coll-perf"].append(t)
                    dist.barrier(group=gloo)
            _, factor = make_op(op, 4 * n, n, rank, collc)
            c, g = statistics.median(times["collc"]), statistics.median(times["gloo"])
            cb, gb = size / c / 1e3 * factor, size / g / 1e3 * factor
            if rank == 0:
                extra = ""
                if times["coll-perf"]:
                    cp = statistics.median(times["coll-perf"])
                    extra = (",%.2f,%s" % (cp, plan) if args.csv
                             else "  %12.2f %8.2f  %s" % (cp, c - cp, plan))
                elif versus and not args.csv:
                    extra = "  %12s %8s" % ("-", "-")
                elif versus:
                    extra = ",,"
                if args.csv:
                    print("%s,%d,%d,%.2f,%.2f,%.3f,%.3f,%.2f" % (op, n, size, c, g, cb, gb, g / c)
                          + extra)
                else:
                    print("%-18s %10d %12.2f %12.2f %10.3f %10.3f %7.1fx" % (
                        op, size, c, g, cb, gb, g / c) + extra, flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    options = parse_args()
    if options.spawn and not options.port:
        options.port = free_port()  # One for every rank: chosen before they start.
    if options.spawn:
        import torch.multiprocessing as mp
        mp.spawn(main, args=(options,), nprocs=options.spawn)
    else:
        main(None, options)
