#!/usr/bin/env python3
"""Two selection tables against each other on this host: coll-perf runs
each table's programs with ranks as processes, the two alternating, and
prints the median time per point (us) as `first / second`, with how many
points each wins by more than 10%.

    bench/compare-select.py BUILD FIRST.select SECOND.select [--reps 3]
        [--colls allreduce,allgather,alltoall,broadcast] [--nranks 2,4]
        [-- coll-perf arguments]

The coll-perf arguments default to -b 64K -e 16M -f 4 -n 10 -w 3
--placement out-of-place.
"""
import argparse
import csv
import io
import statistics
import subprocess
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("first")
    ap.add_argument("second")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--colls", default="allreduce,allgather,alltoall,broadcast")
    ap.add_argument("--nranks", default="2,4")
    ap.add_argument("--ranks-as", default="processes", choices=["threads", "processes"])
    ap.add_argument("rest", nargs="*")
    # coll-perf's own options follow the tables (after "--" or as they are).
    a, unknown = ap.parse_known_args()
    a.rest = [w for w in a.rest + unknown if w != "--"]
    extra = a.rest or ["-b", "64K", "-e", "16M", "-f", "4", "-n", "10", "-w", "3",
                       "--placement", "out-of-place"]
    perf = a.build + "/tools/coll-perf/coll-perf"
    times = {}  # (coll, n, size, table) -> [us]
    progs = {}
    for coll in a.colls.split(","):
        for n in a.nranks.split(","):
            for rep in range(a.reps):
                for t, table in enumerate([a.first, a.second]):
                    cmd = [perf, "--coll", coll, "--nranks", n, "--ranks-as", a.ranks_as,
                           "--select", table, "--csv"] + extra
                    run = subprocess.run(cmd, capture_output=True, text=True)
                    if run.returncode != 0:
                        # Reported, and the others go on: a point that lacks a
                        # repetition takes the median of those it has.
                        print("failed (exit %d): %s\n%s" % (run.returncode, " ".join(cmd),
                                                           run.stderr.strip()[-2000:]),
                              file=sys.stderr, flush=True)
                        continue
                    for row in csv.DictReader(io.StringIO(run.stdout)):
                        key = (coll, int(n), int(row["size_bytes"]), t)
                        times.setdefault(key, []).append(float(row["time_us"]))
                        progs[key] = row["algorithm"]
    sizes = sorted({k[2] for k in times})

    def label(b):
        return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)

    print("| collective | N | " + " | ".join(label(s) for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    wins = [0, 0]
    ties = 0
    for coll in a.colls.split(","):
        for n in a.nranks.split(","):
            cells = []
            for s in sizes:
                f = times.get((coll, int(n), s, 0))
                g = times.get((coll, int(n), s, 1))
                if not f or not g:
                    cells.append("")
                    continue
                mf, mg = statistics.median(f), statistics.median(g)
                same = progs[(coll, int(n), s, 0)] == progs[(coll, int(n), s, 1)]
                if same:
                    ties += 1
                elif mf < mg / 1.1:
                    wins[0] += 1
                elif mg < mf / 1.1:
                    wins[1] += 1
                else:
                    ties += 1
                cells.append("%.0f / %.0f%s" % (mf, mg, " (same)" if same else ""))
            print("| %s | %s | %s |" % (coll, n, " | ".join(cells)))
    print("\nfirst faster by >10%%: %d; second faster by >10%%: %d; within 10%% or the same "
          "program: %d" % (wins[0], wins[1], ties))


if __name__ == "__main__":
    main()
