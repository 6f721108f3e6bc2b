#!/usr/bin/env python3
"""Measured against predicted on this host: coll-perf --predict for every
stdlib allreduce, allgather and alltoall row (the default selection table's
program at each size) at 2, 4 and 8 ranks, repeated, and the median of the
ratios measured / predicted per point.

    bench/predict-host.py BUILD TOPOLOGY [--ranks-as threads|processes]
                          [--sweeps 3] [--compare TOPOLOGY2] [-- coll-perf arguments]

The coll-perf arguments default to -b 64K -e 32M -f 8 -n 10 -w 3
--placement out-of-place. Prints a Markdown table and how many points lie
within 0.75 to 1.25. --compare prints the same table for a second
description's predictions (another model or calibration) against the same
measurements: the median measured time over its prediction.
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
    ap.add_argument("topology")
    ap.add_argument("--ranks-as", default="threads", choices=["threads", "processes"])
    ap.add_argument("--sweeps", type=int, default=3)
    ap.add_argument("--colls", default="allreduce,allgather,alltoall")
    ap.add_argument("--nranks", default="2,4,8")
    ap.add_argument("--compare", help="a second description, tabulated against the same runs")
    ap.add_argument("rest", nargs="*")
    a = ap.parse_args()
    extra = a.rest or ["-b", "64K", "-e", "32M", "-f", "8", "-n", "10", "-w", "3",
                       "--placement", "out-of-place"]
    perf = a.build + "/tools/coll-perf/coll-perf"
    ratios = {}  # (coll, n, size) -> [measured / predicted]
    measured = {}  # (coll, n, size) -> [measured us]
    programs = {}
    for sweep in range(a.sweeps):
        for coll in a.colls.split(","):
            for n in a.nranks.split(","):
                cmd = [perf, "--coll", coll, "--nranks", n, "--ranks-as", a.ranks_as,
                       "--predict", a.topology, "--csv"] + extra
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                for row in csv.DictReader(io.StringIO(out)):
                    key = (coll, int(n), int(row["size_bytes"]))
                    ratios.setdefault(key, []).append(
                        float(row["time_us"]) / float(row["predicted_us"]))
                    measured.setdefault(key, []).append(float(row["time_us"]))
                    programs.setdefault(key, set()).add(row["algorithm"])
        print("sweep %d of %d done" % (sweep + 1, a.sweeps), file=sys.stderr, flush=True)
    table(a, ratios)
    if a.compare:
        # The second description's predictions (a run of one call each:
        # only its predicted column is read).
        other = {}
        for coll in a.colls.split(","):
            for n in a.nranks.split(","):
                quick = [x for x in extra]
                for flag in ("-n", "-w"):
                    if flag in quick:
                        quick[quick.index(flag) + 1] = "1" if flag == "-n" else "0"
                cmd = [perf, "--coll", coll, "--nranks", n, "--ranks-as", a.ranks_as,
                       "--predict", a.compare, "--csv"] + quick
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                for row in csv.DictReader(io.StringIO(out)):
                    key = (coll, int(n), int(row["size_bytes"]))
                    if key in measured:
                        other[key] = [statistics.median(measured[key]) /
                                      float(row["predicted_us"])]
        print("\nThe same runs against %s:\n" % a.compare)
        table(a, other)


def table(a, ratios):
    sizes = sorted({k[2] for k in ratios})

    def label(b):
        return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)

    print("| collective | N | " + " | ".join(label(s) for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    met = total = 0
    for coll in a.colls.split(","):
        for n in a.nranks.split(","):
            cells = []
            for s in sizes:
                r = ratios.get((coll, int(n), s))
                if not r:
                    cells.append("")
                    continue
                m = statistics.median(r)
                total += 1
                met += 0.75 <= m <= 1.25
                cells.append("%.2f" % m)
            print("| %s | %s | %s |" % (coll, n, " | ".join(cells)))
    print("\n%d of %d points within 0.75 to 1.25" % (met, total))


if __name__ == "__main__":
    main()
