#!/usr/bin/env python3
"""Compile-time scale benchmark of collc.

Compiles the stdlib's ring allreduce, all-pairs alltoall and two-step
alltoall (--programs all: every stdlib program; or a comma-separated list)
for growing rank counts and prints, for each, the wall time, the CPU time
and the peak memory of collc (one fresh process per run, best of --repeat
runs), with the command that reproduces it. A run over --timeout seconds
is stopped and reported as such; a rank count the compiler rejects (a
program's `require`, a limit) is reported with its error.

  python3 bench/collc_scale.py [--collc build/tools/collc/collc] [--ranks 8,64,256,1024]
                               [--programs all|name,...] [--timeout 600]
"""
import glob
import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PROGRAMS = [
    ("ring_allreduce", []),
    ("alltoall_allpairs", []),
    # Groups of 32 ranks: step 1 crosses groups, step 2 stays inside one.
    ("alltoall_twostep", ["-D", "local=32"]),
]


class Rejected(Exception):
    pass


class TimedOut(Exception):
    pass


def run_once(cmd, timeout):
    """Runs cmd; returns (wall s, cpu s, peak KiB) of that child alone."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.perf_counter() - start > timeout:
            proc.kill()
            os.wait4(proc.pid, 0)
            proc.stderr.close()
            raise TimedOut()
        time.sleep(0.01)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    proc.stderr.close()
    if status != 0:
        # A `require` or a limit of the compiler: its first error, without
        # the file's path.
        first = err.splitlines()[0] if err else "exit status %d" % status
        raise Rejected(first.split("error: ", 1)[-1])
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--collc", default=os.path.join(ROOT, "build", "tools", "collc", "collc"))
    ap.add_argument("--ranks", default="8,64,256,1024")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--programs", default="")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()
    ranks = [int(n) for n in args.ranks.split(",")]
    programs = PROGRAMS
    if args.programs == "all":
        names = sorted(os.path.basename(p)[:-5]
                       for p in glob.glob(os.path.join(ROOT, "stdlib", "*.coll")))
        programs = [(n, dict(PROGRAMS).get(n, [])) for n in names]
    elif args.programs:
        programs = [(n, dict(PROGRAMS).get(n, [])) for n in args.programs.split(",")]

    print("| program | N | chunk ops | wall (s) | cpu (s) | peak memory (MiB) | plan (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        plan = os.path.join(tmp, "plan.bin")
        for name, extra in programs:
            src = os.path.join(ROOT, "stdlib", name + ".coll")
            for n in ranks:
                if name == "alltoall_twostep" and n % 32:
                    extra_n = ["-D", "local=%d" % min(n, 8)]
                else:
                    extra_n = extra
                cmd = [args.collc, src, "--nranks", str(n), *extra_n, "-o", plan]
                try:
                    best = min(run_once(cmd, args.timeout) for _ in range(args.repeat))
                except Rejected as e:
                    print("| %s | %d | rejected: %s | | | | |" % (name, n, e))
                    continue
                except TimedOut:
                    print("| %s | %d | | over %g | | | |" % (name, n, args.timeout))
                    sys.stdout.flush()
                    continue
                trace = subprocess.run(
                    [args.collc, src, "--nranks", str(n), *extra_n, "--emit=verify-report"],
                    capture_output=True, text=True, check=True).stdout
                ops = trace.split("\n")[1].split()[0]
                print("| %s | %d | %s | %.2f | %.2f | %.0f | %.1f |" % (
                    name, n, ops, best[0], best[1], best[2] / 1024.0,
                    os.path.getsize(plan) / 2**20))
                sys.stdout.flush()
    print()
    print("command: %s stdlib/<program>.coll --nranks N [-D local=32] -o plan.bin" % args.collc)


if __name__ == "__main__":
    main()
