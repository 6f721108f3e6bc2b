"""What the collc backend does when a job goes wrong: every case raises a
Python exception that says what happened, on every rank that is still
alive, within the group's timeout; nothing hangs and nothing is silently
wrong.

    python3 tests/torch/errors.py            # every case
    python3 tests/torch/errors.py dead mismatch-size
"""

import datetime
import multiprocessing
import os
import socket
import sys
import tempfile
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.environ.get("COLLC_TORCH_PATH", ""))
import collc_torch  # noqa: E402

TIMEOUT = 10  # seconds: the group's timeout in these cases


def rank_main(case, rank, n, port, queue, done):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    try:
        if case == "foreign-plan":
            # A user's program for another collective, selected for all_reduce.
            here = os.path.dirname(os.path.abspath(__file__))
            stdlib = os.path.join(here, "..", "..", "stdlib")
            collc_torch.use_program("allreduce", os.path.join(stdlib, "ring_allgather.coll"))
        dist.init_process_group("collc", rank=rank, world_size=n,
                                timeout=datetime.timedelta(seconds=TIMEOUT))
        t = torch.arange(100, dtype=torch.float32) + rank
        dist.all_reduce(t)  # A first call that works.
        start = time.time()
        if case == "dead":
            if rank == 1:
                os._exit(7)
            dist.all_reduce(t)
        elif case == "dead-recv":
            if rank == 1:
                os._exit(7)
            dist.recv(t, src=1)
        elif case == "dead-subgroup":
            # Messages name a subgroup's ranks by the group's numbers and by
            # the default group's, which the program uses.
            sub = dist.new_group([1, 2, 3])
            if rank != 0:
                dist.all_reduce(t, group=sub)
                if rank == 3:
                    os._exit(7)
                start = time.time()
                dist.all_reduce(t, group=sub)
        elif case == "hang":
            if rank == 1:
                time.sleep(TIMEOUT * 3)
                os._exit(0)
            dist.all_reduce(t)
        elif case == "mismatch-size":
            dist.all_reduce(torch.ones(100 + 100 * rank))
        elif case == "mismatch-op":
            if rank == 0:
                dist.all_reduce(t)
            else:
                dist.broadcast(t, src=0)
        elif case == "mismatch-dtype":
            dist.all_reduce(t.to(torch.float64) if rank == 0 else t)
        elif case == "mismatch-barrier":
            if rank == 0:
                dist.barrier()
            else:
                dist.all_reduce(torch.ones(408))
        elif case == "mismatch-split":
            # A direct exchange (split lists) on one rank, a plan on the
            # other: each would wait for the other's messages.
            out = torch.zeros(4 * n)
            if rank == 0:
                dist.all_to_all_single(out, torch.ones(4 * n), [4] * n, [4] * n)
            else:
                dist.all_to_all_single(out, torch.ones(4 * n))
        elif case == "mismatch-exchange":
            if rank == 0:
                dist.all_to_all([torch.zeros(3) for _ in range(n)],
                                [torch.ones(3) for _ in range(n)])
            else:
                dist.all_reduce(t)
        elif case == "mismatch-exchange-dtype":
            x = torch.ones(2 * n, dtype=torch.float32 if rank == 0 else torch.int32)
            dist.all_to_all_single(torch.zeros_like(x), x, [2] * n, [2] * n)
        elif case == "after-exchange-mismatch":
            try:
                if rank == 0:
                    dist.all_to_all_single(torch.zeros(2 * n), torch.ones(2 * n), [2] * n, [2] * n)
                else:
                    dist.all_reduce(torch.ones(8))
                queue.put((rank, "the mismatch was not reported", 0))
            except RuntimeError:
                pass
            start = time.time()
            x = torch.arange(3 * n, dtype=torch.float32) + 100 * rank
            y = torch.zeros(3 * n)
            dist.all_to_all_single(y, x, [3] * n, [3] * n)
            want = torch.cat([torch.arange(3 * rank, 3 * rank + 3, dtype=torch.float32) + 100 * r
                              for r in range(n)])
            if not torch.equal(y, want):
                raise RuntimeError("wrong result after a mismatch: %s" % y.tolist())
            dist.all_reduce(t)
            if not torch.equal(t, n * (torch.arange(100, dtype=torch.float32) * n + n * (n - 1) / 2)):
                raise RuntimeError("wrong all_reduce after a mismatch: %s" % t[:4].tolist())
        elif case == "wait-timeout":
            # wait(timeout) ends at its own limit, the group's being longer,
            # even after calls that ran on the calling thread.
            if rank == 1:
                time.sleep(TIMEOUT / 2)
                dist.all_reduce(t)
            else:
                work = dist.all_reduce(t, async_op=True)
                work.wait(timeout=datetime.timedelta(seconds=1))
        elif case == "recv-timeout-breaks":
            # A receive that times out breaks the group: the next call fails
            # at once, not after another timeout.
            if rank == 1:
                time.sleep(TIMEOUT * 1.5)
                os._exit(0)
            try:
                dist.recv(t, src=1)
                queue.put((rank, "the receive did not time out", 0))
            except RuntimeError as e:
                first = str(e)
            start = time.time()
            try:
                dist.all_reduce(t)
            except RuntimeError as e:
                raise RuntimeError("after '%s': %s" % (first, e))
        elif case == "after-mismatch":
            # Mismatched arguments are found before any data moves: the
            # group stays usable, and the next call computes right.
            try:
                dist.all_reduce(torch.ones(100 + 100 * rank))
                queue.put((rank, "the mismatch was not reported", 0))
            except RuntimeError:
                pass
            start = time.time()
            t = torch.arange(100, dtype=torch.float32) + rank
            dist.all_reduce(t)
            if not torch.equal(t, 2 * torch.arange(100, dtype=torch.float32) + n * (n - 1) / 2):
                raise RuntimeError("wrong result after a mismatch: %s" % t[:4].tolist())
        elif case == "foreign-plan":
            pass
        queue.put((rank, "no error", time.time() - start))
    except Exception as e:  # noqa: BLE001
        queue.put((rank, "%s: %s" % (type(e).__name__, e), time.time() - start
                   if "start" in locals() else 0))
    # Flush the queue before leaving without torch's clean-up (the group is
    # broken in most cases), and stay until every rank has reported: rank 0
    # holds the store, and leaving early would cut the others off from it
    # before they meet their own error.
    queue.close()
    queue.join_thread()
    done.wait(TIMEOUT * 2 + 10)
    os._exit(0)


def free_port():
    """A TCP port nothing listens on now (the kernel's choice), for the store."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# case -> (ranks, ranks expected to report, substrings each error must hold)
CASES = {
    "dead": (3, [0, 2], ["rank 1"]),
    "dead-recv": (2, [0], ["rank 1", "died"]),
    "dead-subgroup": (4, [1, 2], ["rank 2 (global rank 3)", "died"]),
    "hang": (2, [0], ["rank 1"]),
    "mismatch-size": (2, [0, 1], ["RuntimeError", "collc"]),
    "mismatch-op": (2, [0, 1], ["RuntimeError", "collc"]),
    "mismatch-dtype": (2, [0, 1], ["RuntimeError", "collc"]),
    "mismatch-barrier": (2, [0, 1], ["RuntimeError", "'torch barrier'"]),
    "after-mismatch": (2, [0, 1], None),
    "wait-timeout": (2, [0], ["did not complete within 1000 ms"]),
    "recv-timeout-breaks": (2, [0], ["no message", "broken by an earlier failure"]),
    "mismatch-split": (3, [0, 1, 2], ["RuntimeError", "split lists"]),
    "mismatch-exchange": (2, [0, 1], ["RuntimeError", "all_to_all of tensor lists"]),
    "mismatch-exchange-dtype": (2, [0, 1], ["RuntimeError", "split lists of Float",
                                            "split lists of Int"]),
    "after-exchange-mismatch": (3, [0, 1, 2], None),
    "foreign-plan": (2, [0, 1], ["allgather", "not allreduce"]),
}


def run(case):
    n, reporters, needles = CASES[case]
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    done = ctx.Event()
    port = free_port()
    procs = [ctx.Process(target=rank_main, args=(case, r, n, port, queue, done))
             for r in range(n)]
    for p in procs:
        p.start()
    results = {}
    deadline = time.time() + TIMEOUT * 2 + 10
    while not all(r in results for r in reporters) and time.time() < deadline:
        try:
            rank, what, seconds = queue.get(timeout=1)
            results[rank] = (what, seconds)
        except Exception:  # noqa: BLE001
            pass
    done.set()
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    ok = True
    for r in reporters:
        if r not in results:
            print("%s: rank %d reported nothing (hung?)" % (case, r))
            ok = False
            continue
        what, seconds = results[r]
        if needles is None:
            if what != "no error":
                print("%s: rank %d: expected success, got: %s" % (case, r, what))
                ok = False
            else:
                print("%s: rank %d succeeded" % (case, r))
        elif what == "no error" or not all(s in what for s in needles):
            print("%s: rank %d: expected an error with %s, got: %s" % (case, r, needles, what))
            ok = False
        elif seconds > (TIMEOUT / 2 if case.startswith("mismatch") or case in
                        ("wait-timeout", "recv-timeout-breaks") else TIMEOUT * 2):
            # Mismatched calls are found when they meet, not at the timeout.
            print("%s: rank %d took %.1f s to fail" % (case, r, seconds))
            ok = False
        else:
            print("%s: rank %d failed in %.2f s: %s" % (case, r, seconds,
                                                       what.splitlines()[0][:200]))
    return ok


if __name__ == "__main__":
    cases = sys.argv[1:] or list(CASES)
    failed = [c for c in cases if not run(c)]
    print("%d of %d cases as expected" % (len(cases) - len(failed), len(cases)))
    sys.exit(1 if failed else 0)
