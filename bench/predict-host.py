#!/usr/bin/env python3
"""Measured against predicted on this host: coll-perf --predict for every
stdlib allreduce, allgather and alltoall row (the default selection table's
program at each size) at 2, 4 and 8 ranks, repeated, and the median of the
ratios measured / predicted per point.

    bench/predict-host.py BUILD TOPOLOGY [--ranks-as threads|processes]
                          [--sweeps 3] [--compare TOPOLOGY2] [--programs]
                          [--save FILE | --measured FILE]
                          [-- coll-perf arguments]

The coll-perf arguments default to -b 64K -e 32M -f 8 -n 10 -w 3
--placement out-of-place. Prints a Markdown table and how many points lie
within 0.75 to 1.25. --compare prints the same table for a second
description's predictions (another model or calibration) against the same
measurements: the median measured time over its prediction. --programs
measures every stdlib program of each collective (a row per program and
rank count, those whose require refuses the rank count left out) instead
of the selection table's pick. --save keeps the measured times (JSON);
--measured reads them back instead of measuring, to try another
description against the same runs in seconds.
"""
import argparse
import csv
import glob
import io
import json
import os
import re
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
    ap.add_argument("--programs", action="store_true",
                    help="every stdlib program of each collective, not the table's pick")
    ap.add_argument("--save", help="write the measured times (JSON) to this file")
    ap.add_argument("--measured",
                    help="measured times saved by --save: predict only, against them")
    argv = sys.argv[1:]
    rest = argv[argv.index("--") + 1:] if "--" in argv else []
    a = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    a.rest = rest
    a.subjects = subjects(a)
    extra = a.rest or ["-b", "64K", "-e", "32M", "-f", "8", "-n", "10", "-w", "3",
                       "--placement", "out-of-place"]
    perf = a.build + "/tools/coll-perf/coll-perf"
    ratios = {}  # (coll, n, size) -> [measured / predicted]
    measured = {}  # (coll, n, size) -> [measured us]
    programs = {}
    if a.measured:
        with open(a.measured) as f:
            for k, v in json.load(f).items():
                label, n, size = k.split("|")
                measured[(label, int(n), int(size))] = v
        a.sweeps = 0
    for sweep in range(a.sweeps):
        for label, what in a.subjects:
            for n in a.nranks.split(","):
                out = run(perf, what, n, a, a.topology, extra)
                if out is None:
                    continue
                for row in csv.DictReader(io.StringIO(out)):
                    key = (label, int(n), int(row["size_bytes"]))
                    ratios.setdefault(key, []).append(
                        float(row["time_us"]) / float(row["predicted_us"]))
                    measured.setdefault(key, []).append(float(row["time_us"]))
                    programs.setdefault(key, set()).add(row["algorithm"])
        print("sweep %d of %d done" % (sweep + 1, a.sweeps), file=sys.stderr, flush=True)
    if a.save:
        with open(a.save, "w") as f:
            json.dump({"%s|%d|%d" % k: v for k, v in sorted(measured.items())}, f, indent=0)
    if a.measured:
        ratios = predicted_against(a, perf, extra, a.topology, measured)
    table(a, ratios)
    if a.compare:
        print("\nThe same runs against %s:\n" % a.compare)
        table(a, predicted_against(a, perf, extra, a.compare, measured))


def predicted_against(a, perf, extra, topology, measured):
    """The median measured time over the prediction on \p topology, per
    point (a run of one call each: only its predicted column is read)."""
    other = {}
    quick = [x for x in extra]
    for flag in ("-n", "-w"):
        if flag in quick:
            quick[quick.index(flag) + 1] = "1" if flag == "-n" else "0"
    for label, what in a.subjects:
        for n in a.nranks.split(","):
            out = run(perf, what, n, a, topology, quick)
            if out is None:
                continue
            for row in csv.DictReader(io.StringIO(out)):
                key = (label, int(n), int(row["size_bytes"]))
                if key in measured:
                    other[key] = [statistics.median(measured[key]) / float(row["predicted_us"])]
    return other


def subjects(a):
    """(row label, what coll-perf runs): each collective's table pick, or
    with --programs each stdlib program that implements it."""
    out = []
    stdlib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "stdlib")
    for coll in a.colls.split(","):
        if not a.programs:
            out.append((coll, ["--coll", coll]))
            continue
        for path in sorted(glob.glob(os.path.join(stdlib, "*.coll"))):
            text = open(path).read()
            if re.search(r"^algorithm\s+\w+\s+implements\s+%s\b" % coll, text, re.M):
                name = os.path.basename(path)[:-5]
                out.append((name, [path]))
    return out


def run(perf, what, n, a, topology, extra):
    """coll-perf's CSV, or None where the program refuses the rank count."""
    cmd = [perf] + what + ["--nranks", n, "--ranks-as", a.ranks_as, "--predict", topology,
                           "--csv"] + extra
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        if a.programs and "require" in p.stderr:
            return None
        sys.exit("%s failed:\n%s" % (" ".join(cmd), p.stderr))
    return p.stdout


def table(a, ratios):
    sizes = sorted({k[2] for k in ratios})

    def label(b):
        return "%d MiB" % (b >> 20) if b >= 1 << 20 else "%d KiB" % (b >> 10)

    print("| %s | N | " % ("program" if a.programs else "collective") +
          " | ".join(label(s) for s in sizes) + " |")
    print("|---|---|" + "---|" * len(sizes))
    met = total = 0
    for coll, _ in a.subjects:
        for n in a.nranks.split(","):
            if not any((coll, int(n), s) in ratios for s in sizes):
                continue
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
