#!/usr/bin/env python3
"""Runs a peer benchmark and checks its CSV: the exact header, at least one
row, and wrong = 0 on every row (the ctest of each peer).

  check-peer.py PEER ARGS...                 (a peer that forks its own ranks)
  check-peer.py --mpirun MPIRUN [--np 2] PEER ARGS...

With --mpirun, the peer's --probe-cma says whether ranks may use
cross-memory attach; when they may not, Open MPI's single-copy mechanism is
turned off (--mca btl_vader_single_copy_mechanism none) and a note says so.
"""
import subprocess
import sys

HEADER = ("collective,algorithm,nranks,ranks_as,size_bytes,count,dtype,op,placement,"
          "time_us,algbw_GBps,busbw_GBps,wrong")


def mpirun_prefix(mpirun, np, peer):
    cmd = [mpirun, "-np", str(np), "--oversubscribe", "--allow-run-as-root"]
    probe = subprocess.run([peer, "--probe-cma"], capture_output=True, text=True)
    if probe.returncode != 0:
        print("note: " + (probe.stdout.strip() or "cross-memory attach probe failed"))
        cmd += ["--mca", "btl_vader_single_copy_mechanism", "none"]
    return cmd


def main(argv):
    args = argv[1:]
    cmd = []
    if args[:1] == ["--mpirun"]:
        mpirun = args[1]
        args = args[2:]
        np = 2
        if args[:1] == ["--np"]:
            np = int(args[1])
            args = args[2:]
        cmd = mpirun_prefix(mpirun, np, args[0])
    cmd += args
    print("$ " + " ".join(cmd))
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        print("error: timed out")
        return 1
    sys.stdout.write(proc.stdout)
    sys.stdout.write(proc.stderr)
    if proc.returncode != 0:
        print("error: exit status %d" % proc.returncode)
        return 1
    lines = [l for l in proc.stdout.splitlines() if l.strip()]
    if not lines or lines[0] != HEADER:
        print("error: the first line is not the CSV header")
        return 1
    rows = lines[1:]
    if not rows:
        print("error: no rows")
        return 1
    columns = HEADER.split(",")
    for row in rows:
        fields = row.split(",")
        if len(fields) != len(columns):
            print("error: row with %d fields: %s" % (len(fields), row))
            return 1
        if fields[columns.index("wrong")] != "0":
            print("error: wrong elements: %s" % row)
            return 1
    print("ok: %d rows, none wrong" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
