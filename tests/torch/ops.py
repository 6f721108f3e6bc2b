"""Every torch.distributed operation on the collc backend, checked.

Each rank's data is distinct per (rank, element); every result is compared
with what the operation must produce (computed here from the same data) and,
where torch's Gloo backend has the operation, bitwise with Gloo's result on
the same ranks (a second group, backend "gloo", in the same run). The data
are small integers, so that sums, products, minima and maxima are exact in
every type and the order of reduction cannot change a bit.

    torchrun --nproc_per_node 4 tests/torch/ops.py
    python3 tests/torch/ops.py --spawn 3

The same programs run on another backend and device, where the parts that
are Collc's own (registered memory, its refusals) or that the backend lacks
(NCCL: receives from any source, tags, int16, BAND) are left out; e.g. on
CUDA tensors with NCCL, or with libcollc_nccl.so in front of it:

    torchrun --nproc_per_node 1 tests/torch/ops.py --backend nccl --device cuda
"""

import argparse
import os
import socket
import sys
import time
import traceback

import torch
import torch.distributed as dist

R = dist.ReduceOp
BACKEND = "collc"  # --backend
DEV = torch.device("cpu")  # --device: where every tensor of the tests lives.
collc_torch = None  # Imported (registering the backend) when BACKEND is collc.
SIZES = [0, 1, 7, 1000, 40000]
TYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
         torch.uint8, torch.int8]


def value(rank, n, dtype, salt=0, small=False):
    """Distinct per (rank, element): small integers that every type holds."""
    i = torch.arange(n, dtype=torch.int64)
    if small:  # Products of up to 8 ranks stay exact: 1 or 2 (or -1).
        v = 1 + (i + rank + salt) % 2
        if dtype not in (torch.uint8, torch.bool):
            v = torch.where((i + rank) % 5 == 0, -v, v)
    elif dtype in (torch.uint8, torch.int8):
        v = (i * 7 + rank * 13 + salt) % 16
    elif dtype in (torch.float16, torch.bfloat16):
        v = (i * 3 + rank * 5 + salt) % 64 - 20
    else:
        v = (i * 31 + rank * 1009 + salt * 7) % 100003 - 5000
    return v.to(dtype).to(DEV)


def reduce_ref(tensors, op):
    out = tensors[0].clone()
    for t in tensors[1:]:
        if op == R.SUM or op == R.AVG:
            out = out + t
        elif op == R.PRODUCT:
            out = out * t
        elif op == R.MIN:
            out = torch.minimum(out, t)
        elif op == R.MAX:
            out = torch.maximum(out, t)
    if op == R.AVG:
        out = out / len(tensors) if out.is_floating_point() else torch.div(
            out, len(tensors), rounding_mode="trunc")
    return out.to(tensors[0].dtype)


class Checker:
    def __init__(self, rank, n):
        self.rank, self.n, self.failures, self.checks = rank, n, [], 0

    def same(self, what, got, want):
        self.checks += 1
        got, want = got.cpu(), want.cpu()
        if got.dtype != want.dtype or got.shape != want.shape or not torch.equal(got, want):
            bad = (got != want).nonzero()[:3].tolist() if got.shape == want.shape else "shape"
            self.failures.append("rank %d: %s: got %s, want %s (first differences at %s)" % (
                self.rank, what, got.flatten()[:6].tolist(), want.flatten()[:6].tolist(), bad))


def run_ops(c, group, gloo):
    rank, n = c.rank, c.n

    def both(name, fn, with_gloo=True):
        """Runs fn(group) and, when Gloo has the operation, fn(gloo); their
        results must be equal bit for bit."""
        got = fn(group)
        if gloo is not None and with_gloo:
            try:
                ref = fn(gloo)
            except RuntimeError as e:
                if "does not support" in str(e) or "not supported" in str(e) or \
                        "is not implemented" in str(e) or "Unsupported" in str(e) or \
                        "Invalid scalar type" in str(e):
                    return got
                raise
            for i, (a, b) in enumerate(zip(got, ref)):
                c.same("%s against gloo (tensor %d)" % (name, i), a, b)
        return got

    ops = [R.SUM, R.PRODUCT, R.MIN, R.MAX]
    for dtype in TYPES:
        for size in SIZES:
            for op in ops:
                small = op == R.PRODUCT
                def allreduce(g):
                    t = value(rank, size, dtype, small=small)
                    dist.all_reduce(t, op=op, group=g)
                    return [t]
                got = both("all_reduce %s %s n=%d" % (dtype, op, size), allreduce)
                want = reduce_ref([value(r, size, dtype, small=small) for r in range(n)], op)
                c.same("all_reduce %s %s n=%d" % (dtype, op, size), got[0], want)
        # AVG (Gloo has none).
        if dtype.is_floating_point:
            t = value(rank, 1000, dtype)
            dist.all_reduce(t, op=R.AVG, group=group)
            want = reduce_ref([value(r, 1000, dtype) for r in range(n)], R.AVG)
            c.same("all_reduce %s AVG" % dtype, t, want)

    bcast_types = [torch.float32, torch.int64, torch.int16, torch.bool, torch.complex64]
    if BACKEND == "nccl":
        bcast_types.remove(torch.int16)  # NCCL has no int16.
    for dtype in bcast_types:
        for size in [0, 5, 3001]:
            for root in range(n):
                def bcast(g):
                    t = value(rank, size, torch.int64, salt=root).to(dtype)
                    dist.broadcast(t, src=root, group=g)
                    return [t]
                got = both("broadcast %s root %d" % (dtype, root), bcast)
                c.same("broadcast %s root %d" % (dtype, root), got[0],
                       value(root, size, torch.int64, salt=root).to(dtype))

    for root in range(n):
        for op in ops:
            size = 777
            small = op == R.PRODUCT
            t = value(rank, size, torch.float32, small=small)
            orig = t.clone()
            dist.reduce(t, dst=root, op=op, group=group)
            want = reduce_ref([value(r, size, torch.float32, small=small) for r in range(n)], op)
            c.same("reduce root %d %s" % (root, op), t, want if rank == root else orig)

    for size in [0, 1, 999]:
        def allgather(g):
            outs = [torch.full((size,), -1, dtype=torch.int32, device=DEV) for _ in range(n)]
            dist.all_gather(outs, value(rank, size, torch.int32), group=g)
            return outs
        # Gloo divides by zero on empty tensors here.
        got = both("all_gather n=%d" % size, allgather, with_gloo=size > 0)
        for r in range(n):
            c.same("all_gather n=%d from %d" % (size, r), got[r], value(r, size, torch.int32))
        out = torch.empty(n * size, dtype=torch.float64, device=DEV)
        dist.all_gather_into_tensor(out, value(rank, size, torch.float64), group=group)
        c.same("all_gather_into_tensor n=%d" % size, out,
               torch.cat([value(r, size, torch.float64) for r in range(n)]))

    # The list's tensors as the runtime's receive blocks (each where it
    # lies), and the lists that cannot be: in place (the input is this
    # rank's output), views of one tensor in order and out of order,
    # strided views, and one tensor twice in the list.
    for dtype, size in [(torch.float64, 3001), (torch.complex64, 77), (torch.bool, 1000),
                        (torch.float32, 100003)]:
        want = [value(r, size, torch.int64, salt=5).to(dtype) for r in range(n)]
        outs = [torch.zeros(size, dtype=dtype, device=DEV) for _ in range(n)]
        outs[rank].copy_(want[rank])
        dist.all_gather(outs, outs[rank], group=group)
        for r in range(n):
            c.same("all_gather in place %s n=%d from %d" % (dtype, size, r), outs[r], want[r])
        whole = torch.zeros(n * size, dtype=dtype, device=DEV)
        views = list(whole.chunk(n))
        dist.all_gather(views[::-1], want[rank].clone(), group=group)
        c.same("all_gather into reversed views %s n=%d" % (dtype, size), whole,
               torch.cat(want[::-1]))
        if BACKEND != "nccl":  # NCCL's backend refuses strided tensors.
            grid = torch.zeros(size, n, dtype=dtype, device=DEV)
            dist.all_gather([grid[:, j] for j in range(n)], want[rank].clone(), group=group)
            c.same("all_gather into strided views %s n=%d" % (dtype, size), grid,
                   torch.stack(want, dim=1))
        if n > 2:
            outs = [torch.zeros(size, dtype=dtype, device=DEV) for _ in range(n)]
            outs[2] = outs[0]
            dist.all_gather(outs, want[rank].clone(), group=group)
            for r in range(1, n):
                if r != 2:
                    c.same("all_gather, a tensor twice, %s from %d" % (dtype, r), outs[r], want[r])
            c.same("all_gather, a tensor twice, %s" % dtype,
                   torch.tensor(bool(torch.equal(outs[0], want[0]) or torch.equal(outs[0], want[2]))),
                   torch.tensor(True))

    for root in range(n):
        size = 333
        outs = [torch.empty(size, dtype=torch.int64, device=DEV) for _ in range(n)] if rank == root else None
        dist.gather(value(rank, size, torch.int64), outs, dst=root, group=group)
        if rank == root:
            for r in range(n):
                c.same("gather root %d from %d" % (root, r), outs[r], value(r, size, torch.int64))
        out = torch.empty(size, dtype=torch.float32, device=DEV)
        ins = [value(root, size, torch.float32, salt=j) for j in range(n)] if rank == root else None
        dist.scatter(out, ins, src=root, group=group)
        c.same("scatter root %d" % root, out, value(root, size, torch.float32, salt=rank))

    for op in [R.SUM, R.MAX]:
        size = 513
        ins = [value(rank, size, torch.int32, salt=j) for j in range(n)]
        out = torch.empty(size, dtype=torch.int32, device=DEV)
        dist.reduce_scatter(out, ins, op=op, group=group)
        want = reduce_ref([value(r, size, torch.int32, salt=rank) for r in range(n)], op)
        c.same("reduce_scatter %s" % op, out, want)
        whole = torch.cat([value(rank, size, torch.float32, salt=j) for j in range(n)])
        out = torch.empty(size, dtype=torch.float32, device=DEV)
        dist.reduce_scatter_tensor(out, whole, op=op, group=group)
        want = reduce_ref([value(r, size, torch.float32, salt=rank) for r in range(n)], op)
        c.same("reduce_scatter_tensor %s" % op, out, want)

    # all_to_all_single, equal splits (2-D: rows of 3).
    def a2a_equal(g):
        inp = value(rank, n * 4 * 3, torch.float32).view(n * 4, 3)
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp, group=g)
        return [out]
    got = both("all_to_all_single", a2a_equal)
    want = torch.cat([value(r, n * 4 * 3, torch.float32).view(n * 4, 3)[rank * 4:rank * 4 + 4]
                      for r in range(n)])
    c.same("all_to_all_single", got[0], want)

    # Uneven splits, as mixture-of-experts layers send: rank r sends
    # (r + j) % 3 rows to rank j (some none).
    def rows(src, dst):
        return (src + dst) % 3

    def a2a_uneven(g):
        in_splits = [rows(rank, j) for j in range(n)]
        out_splits = [rows(j, rank) for j in range(n)]
        inp = value(rank, sum(in_splits) * 2, torch.int64).view(-1, 2)
        out = torch.full((sum(out_splits), 2), -7, dtype=torch.int64, device=DEV)
        dist.all_to_all_single(out, inp, out_splits, in_splits, group=g)
        return [out]
    got = both("all_to_all_single uneven", a2a_uneven)
    pieces = []
    for src in range(n):
        splits = [rows(src, j) for j in range(n)]
        t = value(src, sum(splits) * 2, torch.int64).view(-1, 2)
        pieces.append(t[sum(splits[:rank]):sum(splits[:rank]) + splits[rank]])
    c.same("all_to_all_single uneven", got[0], torch.cat(pieces))

    # all_to_all of lists (sizes differ per peer).
    ins = [value(rank, 10 + j, torch.float64, salt=j) for j in range(n)]
    outs = [torch.empty(10 + rank, dtype=torch.float64, device=DEV) for _ in range(n)]
    dist.all_to_all(outs, ins, group=group)
    for src in range(n):
        c.same("all_to_all from %d" % src, outs[src], value(src, 10 + rank, torch.float64, salt=rank))

    # all_to_all of lists with empty blocks, received where the outputs lie,
    # and into strided views (copied).
    sz = lambda src, dst: (src * 3 + dst) % 4  # Some zero.
    ins = [value(rank, sz(rank, j), torch.int32, salt=j) for j in range(n)]
    outs = [torch.full((sz(j, rank),), -1, dtype=torch.int32, device=DEV) for j in range(n)]
    dist.all_to_all(outs, ins, group=group)
    for src in range(n):
        c.same("all_to_all with empty blocks from %d" % src, outs[src],
               value(src, sz(src, rank), torch.int32, salt=rank))
    if BACKEND != "nccl":
        grid = torch.zeros(5, n, dtype=torch.int32, device=DEV)
        dist.all_to_all([grid[:, j] for j in range(n)],
                        [value(rank, 5, torch.int32, salt=j) for j in range(n)], group=group)
        c.same("all_to_all into strided views", grid,
               torch.stack([value(j, 5, torch.int32, salt=rank) for j in range(n)], dim=1))

    # Lists sent where they lie (send blocks): scatter and reduce_scatter,
    # in place (the output is the root's or this rank's own input), with one
    # tensor in the list twice, and from strided views (copied).
    size = 1001
    for root in range(n):
        ins = [value(root, size, torch.float64, salt=j) for j in range(n)] if rank == root else None
        out = ins[root] if rank == root else torch.zeros(size, dtype=torch.float64, device=DEV)
        dist.scatter(out, ins, src=root, group=group)
        c.same("scatter in place root %d" % root, out, value(root, size, torch.float64, salt=rank))
    for size in [1001, 4096, 100003]:  # Small and large: the table's plans differ.
        ins = [value(rank, size, torch.int64, salt=j) for j in range(n)]
        want = reduce_ref([value(r, size, torch.int64, salt=rank) for r in range(n)], R.SUM)
        dist.reduce_scatter(ins[rank], ins, op=R.SUM, group=group)
        c.same("reduce_scatter in place n=%d" % size, ins[rank], want)
        for j in range(n):  # The other inputs are the caller's, untouched.
            if j != rank:
                c.same("reduce_scatter in place n=%d, input %d" % (size, j), ins[j],
                       value(rank, size, torch.int64, salt=j))
        one = value(rank, size, torch.int64)
        dist.reduce_scatter(one, [one] * n, op=R.SUM, group=group)
        c.same("reduce_scatter of one tensor n times into itself n=%d" % size, one,
               reduce_ref([value(r, size, torch.int64) for r in range(n)], R.SUM))
        one = value(rank, size, torch.int64)
        out = torch.zeros(size, dtype=torch.int64, device=DEV)
        dist.reduce_scatter(out, [one] * n, op=R.MAX, group=group)
        c.same("reduce_scatter of one tensor n times n=%d" % size, out,
               reduce_ref([value(r, size, torch.int64) for r in range(n)], R.MAX))
        c.same("reduce_scatter of one tensor n times, its input n=%d" % size, one,
               value(rank, size, torch.int64))
    size = 1001
    if BACKEND != "nccl":
        grid = torch.stack([value(rank, size, torch.int64, salt=j) for j in range(n)], dim=1)
        out = torch.zeros(size, dtype=torch.int64, device=DEV)
        dist.reduce_scatter(out, [grid[:, j] for j in range(n)], op=R.SUM, group=group)
        c.same("reduce_scatter from strided views", out,
               reduce_ref([value(r, size, torch.int64, salt=rank) for r in range(n)], R.SUM))

    # Non-contiguous tensors are worked on in place all the same (NCCL's
    # backend refuses them: "Tensors must be contiguous").
    if BACKEND != "nccl":
        base = value(rank, 64, torch.float32).view(8, 8)
        t = base.t()
        dist.all_reduce(t, group=group)
        want = reduce_ref([value(r, 64, torch.float32).view(8, 8) for r in range(n)], R.SUM).t()
        c.same("all_reduce of a transposed tensor", t, want)
        s = value(rank, 40, torch.int64)
        dist.all_reduce(s[::3], op=R.MAX, group=group)
        want = value(rank, 40, torch.int64)
        want[::3] = reduce_ref([value(r, 40, torch.int64)[::3] for r in range(n)], R.MAX)
        c.same("all_reduce of a strided slice", s, want)

    # Bool and complex.
    b = (value(rank, 50, torch.int64) % 3 == 0)
    b_or, b_and = b.clone(), b.clone()
    dist.all_reduce(b_or, op=R.SUM, group=group)
    all_b = [(value(r, 50, torch.int64) % 3 == 0) for r in range(n)]
    c.same("all_reduce bool SUM (or)", b_or, torch.stack(all_b).any(0))
    if BACKEND != "nccl":  # NCCL has no BAND.
        dist.all_reduce(b_and, op=R.BAND, group=group)
        c.same("all_reduce bool BAND (and)", b_and, torch.stack(all_b).all(0))
    z = torch.complex(value(rank, 30, torch.float32), value(rank, 30, torch.float32, salt=1))
    dist.all_reduce(z, group=group)
    want = sum(torch.complex(value(r, 30, torch.float32), value(r, 30, torch.float32, salt=1))
               for r in range(n))
    c.same("all_reduce complex64", z, want)

    # Asynchronous work, futures and the order of a group's operations.
    works, ts = [], []
    for k in range(5):
        t = value(rank, 2000, torch.float32, salt=k)
        ts.append(t)
        works.append(dist.all_reduce(t, group=group, async_op=True))
    fut = works[-1].get_future()
    for w in works:
        w.wait()
        if DEV.type == "cuda":  # wait() orders the stream; the host waits here.
            torch.cuda.synchronize()
        assert w.is_completed()
    fut.wait()
    for k, t in enumerate(ts):
        c.same("async all_reduce %d" % k, t,
               reduce_ref([value(r, 2000, torch.float32, salt=k) for r in range(n)], R.SUM))
    c.same("future's value", fut.value()[0], ts[-1])

    # A future's callback runs where the operation finished (the group's
    # thread of work) and may issue another operation and wait for it, as
    # DDP's PowerSGD hook does: that must not wait for the thread it is on.
    t = value(rank, 600, torch.float32, salt=5)
    u = value(rank, 900, torch.float64, salt=6)

    def then_all_reduce(f):
        inner = dist.all_reduce(u, group=group, async_op=True).get_future()
        inner.wait()
        dist.all_reduce(u, op=R.MAX, group=group)  # And a blocking one.
        return f.value()[0] + 1

    chained = dist.all_reduce(t, group=group, async_op=True).get_future().then(then_all_reduce)
    c.same("a callback's own all_reduce", chained.wait(),
           reduce_ref([value(r, 600, torch.float32, salt=5) for r in range(n)], R.SUM) + 1)
    c.same("a callback's own all_reduce (inner)", u,
           reduce_ref([value(r, 900, torch.float64, salt=6) for r in range(n)], R.SUM))

    # An asynchronous operation goes on while the caller does something
    # else: it completes without a wait().
    import time
    t = value(rank, 3000, torch.float32, salt=9)
    w = dist.all_reduce(t, group=group, async_op=True)
    deadline = time.time() + 20
    while not w.is_completed() and time.time() < deadline:
        time.sleep(0.01)
    c.checks += 1
    if not w.is_completed():
        c.failures.append("rank %d: an async all_reduce did not complete without wait()" % rank)
    w.wait()
    c.same("async all_reduce without wait", t,
           reduce_ref([value(r, 3000, torch.float32, salt=9) for r in range(n)], R.SUM))

    # When wait() returns, the work's future is completed, as with Gloo
    # (torch's Reducer reads the future's value right after wait(), e.g.
    # under Join). The ranks arrive at different times, so that the work
    # is finished by another thread than the waiting one.
    not_done = 0
    for i in range(300):
        u = value(rank, 7, torch.float32, salt=i)
        if rank == 1:
            time.sleep(0.0002 * (i % 4))
        w = dist.all_reduce(u, group=group, async_op=True)
        if rank == 0:
            time.sleep(0.0002 * (i % 3))
        w.wait()
        if not w.get_future().done():
            not_done += 1
    c.checks += 1
    if not_done:
        c.failures.append("rank %d: %d of 300 futures were not completed when wait() returned"
                          % (rank, not_done))

    # Errors the backend refuses clearly.
    refusals = [] if BACKEND != "collc" else [
        (lambda: dist.all_reduce(torch.ones(3), op=R.BAND, group=group), "BAND"),
        (lambda: dist.all_reduce(torch.ones(3, dtype=torch.int16), group=group), "int16")]
    for bad, what in refusals:
        c.checks += 1
        try:
            bad()
            c.failures.append("rank %d: %s was not refused" % (rank, what))
        except RuntimeError as e:
            if "collc" not in str(e):
                c.failures.append("rank %d: %s: unexpected error %s" % (rank, what, e))

    dist.barrier(group=group)


def run_p2p(c, group):
    """send/recv with tags, from any source, isend/irecv in either order,
    batch_isend_irecv, messages larger than a channel."""
    rank, n = c.rank, c.n
    if n == 1:
        return  # torch refuses a send to oneself.
    nxt, prv = (rank + 1) % n, (rank - 1) % n
    if BACKEND == "collc":
        # A negative tag is refused at the call, as Gloo refuses it.
        for call in (lambda: dist.send(torch.zeros(1), dst=nxt, group=group, tag=-1),
                     lambda: dist.recv(torch.zeros(1), src=prv, group=group, tag=-2)):
            c.checks += 1
            try:
                call()
                c.failures.append("rank %d: a negative tag was taken" % rank)
            except RuntimeError as e:
                if "must not be negative" not in str(e):
                    c.failures.append("rank %d: negative tag: %s" % (rank, e))
    for size in [0, 1, 1000, 300000]:
        # Everyone sends first, then receives: buffered, no deadlock.
        dist.send(value(rank, size, torch.float32, salt=nxt), dst=nxt, group=group, tag=3)
        t = torch.full((size,), -1.0, device=DEV)
        dist.recv(t, src=prv, group=group, tag=3)
        c.same("send/recv ring n=%d" % size, t, value(prv, size, torch.float32, salt=rank))
    # A receive posted before this rank's own send does not hold it back.
    t = torch.empty(5000, dtype=torch.int64, device=DEV)
    r = dist.irecv(t, src=prv, group=group, tag=11)
    s = dist.isend(value(rank, 5000, torch.int64, salt=11), dst=nxt, group=group, tag=11)
    r.wait()
    s.wait()
    c.same("irecv before isend", t, value(prv, 5000, torch.int64, salt=11))
    # Tags out of order: rank 0 sends tags 1, 2 to rank 1, which takes 2 first
    # (NCCL has no tags).
    if n >= 2 and rank in (0, 1) and BACKEND != "nccl":
        if rank == 0:
            dist.send(value(0, 100, torch.float64, salt=1), dst=1, tag=1, group=group)
            dist.send(value(0, 200, torch.float64, salt=2), dst=1, tag=2, group=group)
        else:
            b = torch.empty(200, dtype=torch.float64, device=DEV)
            a = torch.empty(100, dtype=torch.float64, device=DEV)
            dist.recv(b, src=0, tag=2, group=group)
            dist.recv(a, src=0, tag=1, group=group)
            c.same("recv tag 2 first", b, value(0, 200, torch.float64, salt=2))
            c.same("then tag 1", a, value(0, 100, torch.float64, salt=1))
    # A callback of a receive's future that waits for another message:
    # rank 1 sends both late, so that the first completes on the thread
    # that delivers messages, which must not run the callback itself.
    if n >= 2 and rank in (0, 1) and BACKEND != "nccl":
        if rank == 1:
            time.sleep(0.2)
            dist.send(value(1, 300, torch.float32, salt=31), dst=0, tag=31, group=group)
            time.sleep(0.2)
            dist.send(value(1, 300, torch.float32, salt=32), dst=0, tag=32, group=group)
        else:
            first = torch.empty(300, device=DEV)
            second = torch.empty(300, device=DEV)

            def receive_second(fut):
                dist.recv(second, src=1, tag=32, group=group)
                return fut.value()[0] + second

            chained = dist.irecv(first, src=1, tag=31, group=group).get_future().then(
                receive_second)
            c.same("a receive in a receive's callback", chained.wait(),
                   value(1, 300, torch.float32, salt=31) + value(1, 300, torch.float32, salt=32))
    # Receives from any source: rank 0 hears from everyone else (NCCL has
    # none).
    if BACKEND == "nccl":
        pass
    elif rank == 0:
        seen = set()
        for _ in range(n - 1):
            t = torch.empty(64, dtype=torch.int32, device=DEV)
            src = dist.recv(t, tag=21, group=group)
            seen.add(src)
            c.same("recv from any source (%d)" % src, t, value(src, 64, torch.int32, salt=21))
        c.checks += 1
        if seen != set(range(1, n)):
            c.failures.append("rank 0: sources heard %s" % sorted(seen))
    else:
        dist.send(value(rank, 64, torch.int32, salt=21), dst=0, tag=21, group=group)
    # batch_isend_irecv: both neighbours at once, into a strided tensor
    # (NCCL's backend takes contiguous tensors only).
    out = torch.zeros(2, 700, device=DEV)
    recv_from_next = out[0]
    recv_from_prev = torch.zeros(1400, device=DEV)[::2 if BACKEND != "nccl" else 1][:700]
    ops = [dist.P2POp(dist.isend, value(rank, 700, torch.float32, salt=1), nxt, group),
           dist.P2POp(dist.isend, value(rank, 700, torch.float32, salt=2), prv, group),
           dist.P2POp(dist.irecv, recv_from_prev, prv, group),
           dist.P2POp(dist.irecv, recv_from_next, nxt, group)]
    for w in dist.batch_isend_irecv(ops):
        w.wait()
    c.same("batch from prev", recv_from_prev, value(prv, 700, torch.float32, salt=1))
    c.same("batch from next", recv_from_next, value(nxt, 700, torch.float32, salt=2))
    dist.barrier(group=group)


def run_objects(c, group):
    """The object collectives (built by torch on all_gather and broadcast of
    byte tensors of different lengths) and all_gather_coalesced."""
    import warnings
    rank, n = c.rank, c.n
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "data": list(range(rank + 3))}, group=group)
    c.checks += 1
    if objs != [{"rank": r, "data": list(range(r + 3))} for r in range(n)]:
        c.failures.append("rank %d: all_gather_object gave %s" % (rank, objs))
    lst = [{"a": 1}, "x" * 1000] if rank == 0 else [None, None]
    dist.broadcast_object_list(lst, src=0, group=group)
    c.checks += 1
    if lst != [{"a": 1}, "x" * 1000]:
        c.failures.append("rank %d: broadcast_object_list gave %s" % (rank, str(lst)[:80]))
    sl = [None]
    dist.scatter_object_list(sl, [("s", i) for i in range(n)] if rank == 0 else None, src=0,
                             group=group)
    c.checks += 1
    if sl[0] != ("s", rank):
        c.failures.append("rank %d: scatter_object_list gave %s" % (rank, sl))
    if BACKEND == "nccl":
        return  # NCCL's backend has no allgather_coalesced.
    # torch wants one type for all of them. outs[r][i] receives rank r's
    # input i (torch's and Gloo's layout); the sizes differ per input, and
    # two inputs of one size as well, so that no other layout fits.
    sizes = [3, 2, 2]
    outs = [[torch.empty(k, device=DEV) for k in sizes] for _ in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dist.all_gather_coalesced(outs, [value(rank, k, torch.float32, salt=i)
                                         for i, k in enumerate(sizes)], group=group)
    for r in range(n):
        for i, k in enumerate(sizes):
            c.same("all_gather_coalesced [%d][%d]" % (r, i), outs[r][i],
                   value(r, k, torch.float32, salt=i))


def run_subgroups(c):
    """new_group: a subgroup is a group of its own size, ranks renumbered."""
    rank, n = c.rank, c.n
    if n < 3:
        return
    members = list(range(1, n))  # Everyone but rank 0.
    sub = dist.new_group(members, backend=BACKEND)
    evens = [r for r in range(n) if r % 2 == 0]
    odds = [r for r in range(n) if r % 2 == 1]
    g_even = dist.new_group(evens, backend=BACKEND)
    g_odd = dist.new_group(odds, backend=BACKEND)
    if rank in members:
        t = value(rank, 100, torch.int64)
        dist.all_reduce(t, group=sub)
        c.same("subgroup all_reduce", t,
               reduce_ref([value(r, 100, torch.int64) for r in members], R.SUM))
        t = value(rank, 10, torch.int64)
        dist.broadcast(t, src=members[-1], group=sub)  # A global rank as src.
        c.same("subgroup broadcast", t, value(members[-1], 10, torch.int64))
    mine, group = (evens, g_even) if rank % 2 == 0 else (odds, g_odd)
    t = value(rank, 77, torch.float32)
    dist.all_reduce(t, op=R.MAX, group=group)
    c.same("even/odd subgroup all_reduce", t,
           reduce_ref([value(r, 77, torch.float32) for r in mine], R.MAX))


def run_registered(c, group):
    """Operations on tensors in the group's registered memory
    (collc_torch.empty): the peers read what a rank sends where it lies."""
    rank, n = c.rank, c.n
    for dtype in [torch.float32, torch.int64, torch.bool]:
        for size in [0, 7, 100003]:
            t = collc_torch.empty(size, dtype=dtype)
            c.same("registered empty %s n=%d" % (dtype, size), torch.tensor(t.shape),
                   torch.tensor([size]))
            t.copy_(value(rank, size, torch.int64).to(dtype))
            dist.all_reduce(t, op=R.MAX, group=group)
            want = reduce_ref([value(r, size, torch.int64).to(dtype) for r in range(n)], R.MAX)
            c.same("registered all_reduce %s n=%d" % (dtype, size), t, want)
    size = 50000
    inp = collc_torch.empty((size,), dtype=torch.float32)
    inp.copy_(value(rank, size, torch.float32))
    out = collc_torch.empty((n, size), dtype=torch.float32)
    dist.all_gather_into_tensor(out, inp, group=group)
    c.same("registered all_gather_into_tensor", out,
           torch.stack([value(r, size, torch.float32) for r in range(n)]))
    # Every rank received some of it in place (n > 1: a ring's forwarding
    # steps and first send are direct), when all share one host (across
    # hosts every message travels over the network) and the connections run
    # Simple (LL and LL128 carry every message in the lines: COLLC_PROTOCOL).
    direct = collc_torch.last_direct_messages()
    hosts = [None] * n
    dist.all_gather_object(hosts, collc_torch.host_identity(), group=group)
    if len(set(hosts)) == 1 and not os.environ.get("COLLC_PROTOCOL"):
        c.same("registered all_gather read in place", torch.tensor(direct > 0 or n == 1),
               torch.tensor(True))
    for root in range(n):
        t = collc_torch.empty((3, 1000), dtype=torch.float64)
        t.copy_(value(rank, 3000, torch.float64, salt=root).view(3, 1000))
        dist.broadcast(t, src=root, group=group)
        c.same("registered broadcast root %d" % root, t,
               value(root, 3000, torch.float64, salt=root).view(3, 1000))
    inp = collc_torch.empty((n * 400,), dtype=torch.int32)
    inp.copy_(value(rank, n * 400, torch.int32))
    out = collc_torch.empty((n * 400,), dtype=torch.int32)
    dist.all_to_all_single(out, inp, group=group)
    c.same("registered all_to_all_single", out,
           torch.cat([value(r, n * 400, torch.int32)[rank * 400:(rank + 1) * 400]
                      for r in range(n)]))


def free_port():
    """A TCP port nothing listens on now (the kernel's choice), for the store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(rank, n, args):
    if args.hosts:
        # Ranks on hosts of their own (COLL_HOST): rank r on host r % hosts,
        # the ranks of different hosts talking over the network.
        r = rank if args.spawn else int(os.environ["RANK"])
        os.environ["COLL_HOST"] = "h%d" % (r % args.hosts)
    global BACKEND, DEV, collc_torch
    BACKEND = args.backend
    if BACKEND == "collc":
        sys.path.insert(0, os.environ.get("COLLC_TORCH_PATH", ""))
        import collc_torch  # noqa: F401  (registers the backend)
    if args.device == "cuda":
        local = rank if args.spawn else int(os.environ.get("LOCAL_RANK", "0"))
        DEV = torch.device("cuda", local % torch.cuda.device_count())
        torch.cuda.set_device(DEV)
    if args.spawn:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(args.port)
        dist.init_process_group(BACKEND, rank=rank, world_size=n)
    else:
        dist.init_process_group(BACKEND)
    rank, n = dist.get_rank(), dist.get_world_size()
    c = Checker(rank, n)
    try:
        gloo = dist.new_group(backend="gloo") if args.gloo and BACKEND == "collc" else None
        run_ops(c, dist.group.WORLD, gloo)
        run_p2p(c, dist.group.WORLD)
        run_objects(c, dist.group.WORLD)
        if BACKEND == "collc":
            run_registered(c, dist.group.WORLD)
        run_subgroups(c)
    except Exception:
        c.failures.append("rank %d: %s" % (rank, traceback.format_exc()))
    for f in c.failures[:20]:
        print(f, file=sys.stderr, flush=True)
    print("rank %d: %d checks, %d failed" % (rank, c.checks, len(c.failures)), file=sys.stderr,
          flush=True)
    if c.failures:
        os._exit(1)
    dist.destroy_process_group()


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--spawn", type=int, default=0, help="ranks to start with mp.spawn")
    p.add_argument("--port", type=int, default=0,
                   help="the store's port (default: a free one)")
    p.add_argument("--no-gloo", dest="gloo", action="store_false",
                   help="skip the comparison with Gloo")
    p.add_argument("--backend", default="collc", choices=["collc", "nccl"],
                   help="the backend under test")
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"],
                   help="where the tensors live (cuda: one GPU per rank)")
    p.add_argument("--hosts", type=int, default=0,
                   help="spread the ranks over this many hosts (COLL_HOST)")
    args = p.parse_args()
    if args.spawn and not args.port:
        args.port = free_port()  # One for every rank: chosen before they start.
    if args.spawn:
        import torch.multiprocessing as mp
        mp.spawn(main, args=(args.spawn, args), nprocs=args.spawn)
    else:
        main(0, 0, args)
